// attnbench report's peers: the sweep file's [peers] providers that are installed join the
// performance sweep as cases of their own (attn::peer_cases), run by the peer harness
// (experiments/peers/harness.py, in the project's Python) with the same arguments attnbench-bench
// gets; a provider that is not installed is one line in peers.json, and so in report.md, saying
// how to install it.
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>
#include <nlohmann/json.hpp>
#include "report.hpp"

namespace attn::cli::reporting {

std::vector<std::string> peer_command(const run_context& c) {
    std::string python = attn::build().python;
    if (const char* env = std::getenv("ATTNBENCH_PYTHON"); env && *env) python = env;
    const fs::path harness = fs::path(attn::build().source_dir) / "experiments" / "peers" / "harness.py";
    return {python, harness.string(), "--attnbench", c.self};
}

void add_peers(run_context& c) {
    if (c.spec.peers.empty()) return;
    json available = json::array(), missing = json::array();
    std::vector<std::string> runnable;
    fs::create_directories(c.logs());
    for (const auto& name : c.spec.peers) {
        auto argv = peer_command(c);
        argv.insert(argv.end(), {"--available", name});
        const fs::path log = c.logs() / ("peer-" + name + ".txt");
        const auto r = run_process(argv, log.string(), log.string());
        if (r.interrupted()) throw interrupted{};
        if (r.exit_code == 0) {
            runnable.push_back(name);
            available.push_back(name);
            continue;
        }
        std::string why = last_line(log);
        if (why.empty()) why = name + ": the peer harness exited with status " + std::to_string(r.exit_code);
        missing.push_back({{"provider", name}, {"message", why}});
        std::fprintf(stderr, "peers: %s\n", why.c_str());
    }
    json not_served = json::array();
    for (const auto& u : unserved_precisions(c.cases, runnable))
        not_served.push_back({{"provider", u.provider}, {"precision", enum_name(u.precision)}, {"message", u.why}});
    const auto peers = peer_cases(c.cases, runnable);
    c.cases.insert(c.cases.end(), peers.begin(), peers.end());
    c.write("peers.json", json{{"providers", c.spec.peers},
                               {"available", available},
                               {"missing", missing},
                               {"not_served", not_served},
                               {"cases", peers.size()}}
                                  .dump(2) +
                              "\n");
}

} // namespace attn::cli::reporting
