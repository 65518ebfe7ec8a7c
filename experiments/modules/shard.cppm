// attn.shard -- a sweep split into N shards that separate processes (a Slurm job array) run,
// and merged back. The partition is a pure function of the expanded case list: the cases are
// grouped into harness runs (decode cases that differ only in G share one run, so their
// repetitions stay interleaved with each other's), each run is given an estimated cost from
// attn.count, and the runs are dealt longest first onto the least-loaded shard (ties: the lower
// case id first, the lower shard index first). The same sweep expanded at the same thread count
// gives the same shards on any machine, in any order of the list.
module;
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <vector>
#include <nlohmann/json.hpp>
export module attn.shard;
export import attn.cases;
import attn.count;

export namespace attn {

/// Shard `index` of `count` (0 <= index < count).
struct shard_spec {
    std::size_t index = 0, count = 1;
};

/// Parses "I/N" (decimal, 0 <= I < N, N >= 1); throws attn::error naming what is wrong.
inline shard_spec parse_shard(const std::string& text) {
    const auto slash = text.find('/');
    auto number = [&](const std::string& s, const char* what) {
        require(!s.empty() && s.size() <= 9 && s.find_first_not_of("0123456789") == std::string::npos,
                "--shard '" + text + "': " + what + " '" + s + "' is not a whole number (expected I/N, e.g. 0/4)");
        return std::size_t(std::stoul(s));
    };
    require(slash != std::string::npos, "--shard '" + text + "' is not of the form I/N (e.g. 0/4)");
    const shard_spec s{number(text.substr(0, slash), "the index"), number(text.substr(slash + 1), "the count")};
    require(s.count >= 1, "--shard '" + text + "': the count N must be at least 1");
    require(s.index < s.count, "--shard '" + text + "': the index I must be below N = " + std::to_string(s.count) +
                                   " (shards are numbered 0 to N-1)");
    return s;
}

/// The estimated work of one case, in FLOPs per thread (attn.count's full count: the attention
/// core, the whole layer, or one decode step). Fixed costs per case (process start, check,
/// Google Benchmark's minimum time) are the same for every case and are not modelled.
inline double case_cost(const sweep_case& c) {
    const problem p = c.shape();
    double flops = 0;
    if (c.mode == mode::decode)
        flops = double(decode_cost(p, c.context, 4).full_flops); // batch included
    else if (c.mode == mode::layer)
        flops = double(analytic_flops(p).full_flops());
    else
        flops = double(analytic_flops(p).attention_full());
    return flops / double(std::max<std::size_t>(1, c.threads));
}

/// The units a partition deals, in the list's order: one case each, except that decode cases of
/// one run group stay together (differing only in the family, or under one window in L: the report
/// runs them in one harness process, their repetitions interleaved). A peer's cases are dealt one by one: each shard
/// runs its own share of them in one process of the peer harness.
inline std::vector<std::vector<sweep_case>> shard_units(const std::vector<sweep_case>& cases) {
    std::vector<std::vector<sweep_case>> runs;
    std::map<std::string, std::size_t> run_of;
    for (const auto& k : cases) {
        const auto [it, fresh] = run_of.emplace(k.run_group(), runs.size());
        if (fresh) runs.emplace_back();
        runs[it->second].push_back(k);
    }
    return runs;
}

/// Longest-processing-time-first: item i (cost costs[i], tie key keys[i]) goes to the shard
/// with the least load so far (the lowest index among equals); items are taken by decreasing
/// cost, equal costs by increasing key. Returns each item's shard.
inline std::vector<std::size_t> assign_shards(const std::vector<double>& costs, const std::vector<std::string>& keys,
                                              std::size_t count) {
    require(count >= 1, "a partition needs at least one shard");
    require(costs.size() == keys.size(), "assign_shards: one key per cost");
    std::vector<std::size_t> order(costs.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
        return costs[a] != costs[b] ? costs[a] > costs[b] : keys[a] < keys[b];
    });
    std::vector<double> load(count, 0.0);
    std::vector<std::size_t> shard(costs.size(), 0);
    for (auto i : order) {
        const auto s = std::size_t(std::min_element(load.begin(), load.end()) - load.begin());
        shard[i] = s;
        load[s] += costs[i];
    }
    return shard;
}

/// The cases of one shard, in the order of the list.
inline std::vector<sweep_case> shard_cases(const std::vector<sweep_case>& cases, shard_spec s) {
    const auto runs = shard_units(cases);
    std::vector<double> costs;
    std::vector<std::string> keys;
    for (const auto& r : runs) {
        double c = 0;
        for (const auto& k : r) c += case_cost(k);
        costs.push_back(c);
        keys.push_back(r.front().id());
    }
    const auto shard = assign_shards(costs, keys, s.count);
    std::map<std::string, bool> mine;
    for (std::size_t i = 0; i < runs.size(); ++i)
        for (const auto& k : runs[i]) mine[k.id()] = shard[i] == s.index;
    std::vector<sweep_case> out;
    for (const auto& k : cases)
        if (mine[k.id()]) out.push_back(k);
    return out;
}

/// FNV-1a, 64 bits, as 16 hex digits: names a sweep file's text (and a case list) so that
/// shards of different sweeps are told apart. An identity check, not a security measure.
inline std::string fnv1a64(const std::string& text) {
    std::uint64_t h = 0xcbf29ce484222325ull;
    for (unsigned char ch : text) {
        h ^= ch;
        h *= 0x100000001b3ull;
    }
    char buf[17];
    std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
    return buf;
}

} // namespace attn
