// attnbench report --shard I/N: the run keeps only the cases of shard I (attn.shard's partition
// of the expanded sweep) and records in shard.json what a merge needs to check: the sweep's hash,
// I/N, the thread count the list was expanded at (it is part of the case ids), the full list's
// hash, this shard's case ids and the machine it ran on.
//
// Which stages a shard runs: peak and check on every shard, since each shard may land on another
// machine and its cases are measured against that machine's peak and timed only where their
// variant passed check there; the performance sweep on its own cases; the stages that do not
// depend on the machine (params, flops, claims, and any later one) on shard 0 only.
#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>
#include <nlohmann/json.hpp>
#include "report.hpp"
import attn.shard;

namespace attn::cli::reporting {

namespace {

/// The stages every shard runs for its own machine; the others run once, on shard 0.
bool per_machine(const std::string& stage) { return stage == "peak" || stage == "check" || stage == "perf"; }

std::string list_hash(const std::vector<sweep_case>& cases) {
    std::string ids;
    for (const auto& k : cases) ids += k.id() + "\n";
    return fnv1a64(ids);
}

} // namespace

bool select_shard(run_context& c, const std::string& shard_arg, bool resume) {
    const fs::path record = c.dir / "shard.json";
    if (shard_arg.empty() && !(resume && fs::exists(record))) return false;
    const std::string sweep_hash = fnv1a64(c.spec.text);
    shard_spec s;
    if (resume && fs::exists(record)) {
        const json r = read_json(record);
        const std::string recorded = std::to_string(r.value("shard", 0)) + "/" + std::to_string(r.value("shards", 1));
        s = parse_shard(recorded);
        if (!shard_arg.empty())
            require(parse_shard(shard_arg).index == s.index && parse_shard(shard_arg).count == s.count,
                    "--shard " + shard_arg + " differs from " + record.string() + " (shard " + recorded + ")");
        require(r.value("sweep_fnv1a64", std::string()) == sweep_hash,
                record.string() + ": this shard folder belongs to another sweep (hash " +
                    r.value("sweep_fnv1a64", std::string("none")) + ", its sweep.toml has " + sweep_hash + ")");
        require(r.value("threads", 0) == c.threads,
                record.string() + ": the shard was expanded at " + std::to_string(r.value("threads", 0)) +
                    " threads and this process has " + std::to_string(c.threads) +
                    " (its case ids differ): set OMP_NUM_THREADS=" + std::to_string(r.value("threads", 0)));
    } else {
        require(!resume, "--resume --shard: " + record.string() + " not found; the folder is not a shard's");
        s = parse_shard(shard_arg);
    }
    const auto all = c.cases;
    c.cases = shard_cases(all, s);
    if (s.index != 0)
        c.spec.stages.erase(std::remove_if(c.spec.stages.begin(), c.spec.stages.end(),
                                           [](const std::string& st) { return !per_machine(st); }),
                            c.spec.stages.end());
    std::fprintf(stderr, "attnbench report: shard %zu/%zu: %zu of %zu performance cases; stages %s\n", s.index, s.count,
                 c.cases.size(), all.size(), json(c.spec.stages).dump().c_str());
    if (resume) return true;
    json fingerprint = json::object();
    for (const auto& [k, v] : collect_metadata({}))
        if (k == "cpu_model" || k == "cpu_simd_flags" || k == "logical_cores" || k == "hostname") fingerprint[k] = v;
    json ids = json::array();
    for (const auto& k : c.cases) ids.push_back(k.id());
    const json r = {{"shard", s.index},
                    {"shards", s.count},
                    {"sweep_fnv1a64", sweep_hash},
                    {"threads", c.threads},
                    {"cases_total", all.size()},
                    {"case_list_fnv1a64", list_hash(all)},
                    {"stages", c.spec.stages},
                    {"partition", "harness runs dealt longest first (attn.count FLOPs per thread) onto the "
                                  "least-loaded shard; ties by case id, then shard index"},
                    {"machine", fingerprint},
                    {"cases", ids}};
    fs::create_directories(c.dir);
    c.write("shard.json", r.dump(2) + "\n");
    return true;
}

} // namespace attn::cli::reporting
