// Child processes of `attnbench report`: the stages run as subcommands of this binary and the
// performance cases as runs of attnbench-bench, so a crash costs one case, not the run.
#pragma once
#include <string>
#include <vector>

namespace attn::cli {

/// How a child ended.
struct process_result {
    int exit_code = -1; ///< -1 when killed by a signal
    int signal = 0;     ///< the signal that killed it, 0 if it exited
    double seconds = 0; ///< wall time
    /// Ended by SIGINT, SIGTERM, SIGHUP or SIGKILL: the run is being interrupted, not the case failing.
    bool interrupted() const;
};

/// Runs argv[0] (a path) with argv; stdout to `out_path`, stderr to `err_path` (each inherited
/// when empty; created or truncated otherwise); waits for it. Throws attn::error when it cannot start.
process_result run_process(const std::vector<std::string>& argv, const std::string& out_path = "",
                           const std::string& err_path = "");

/// The running executable's path (/proc/self/exe).
std::string self_exe();

} // namespace attn::cli
