// attnbench env: the machine, build and run metadata that every result file carries.
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <omp.h>
#include "commands.hpp"
import attn.results;

namespace attn::cli {

void add_env(CLI::App& app) {
    struct env_args {
        bool json = false;
        run_info info;
    };
    auto a = std::make_shared<env_args>();
    auto* cmd = app.add_subcommand("env", "print the machine, build and run metadata");
    cmd->add_flag("--json", a->json, "print one JSON object");
    cmd->add_option("--seed", a->info.seed, "seed to record")->capture_default_str();
    cmd->add_option("--threads", a->info.threads, "thread count to record (default: OpenMP's, omp_get_max_threads())")
        ->check(threads_in());
    cmd->add_option("--preset", a->info.preset, "preset name to record")->capture_default_str();
    cmd->callback([a, cmd] {
        // resolved here, not at registration: OpenMP is first called after main checked OMP_NUM_THREADS
        if (cmd->count("--threads") == 0) a->info.threads = omp_get_max_threads();
        const metadata m = collect_metadata(a->info);
        std::fputs(a->json ? (to_json(m) + "\n").c_str() : render_metadata(m).c_str(), stdout);
    });
}

} // namespace attn::cli
