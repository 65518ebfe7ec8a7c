// Child processes of `attnbench report`: the stages run as subcommands of this binary and the
// performance cases as runs of attnbench-bench, so a crash costs one case, not the run.
#pragma once
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>
#include <sys/prctl.h>
#include <unistd.h>

namespace attn::cli {

/// How a child ended.
struct process_result {
    int exit_code = -1;    ///< -1 when killed by a signal
    int signal = 0;        ///< the signal that killed it, 0 if it exited
    double seconds = 0;    ///< wall time
    int parent_signal = 0; ///< SIGINT/SIGTERM/SIGHUP this process received (see forward_signals)
    /// This process was asked to stop, or the child ended by SIGINT, SIGTERM or SIGHUP: the run is
    /// being interrupted, not the case failing. A child killed by SIGKILL (the kernel's OOM killer,
    /// kill -9) is a failed case: it is recorded with its reason and the run goes on.
    bool interrupted() const;
};

/// The exit statuses of attnbench and attnbench-bench (README, "Exit statuses"): 0 done; 1 the
/// work ran and found a failure (a check out of bound, plots failed); 2 a usage or input error;
/// 3 out of memory; 4 an internal error (an unexpected exception: a bug); 130 interrupted.
/// How `r` ended, in those words: "exit status 3 (out of memory)", "killed by signal 11 (Segmentation fault)".
std::string exit_text(const process_result& r);

/// From now on SIGINT, SIGTERM and SIGHUP to this process are passed to the running child (so
/// no child outlives its parent) and recorded; run_process then reports parent_signal and
/// starts no further child.
void forward_signals();

/// The child's half of "no child outlives its parent", for the one signal a parent cannot pass
/// on: killed by SIGKILL (kill -9, the OOM killer), `attnbench report` leaves its child running.
/// forward_signals() puts the report's pid in ATTNBENCH_PARENT_PID; a main that finds its own
/// parent there asks the kernel for SIGTERM when that parent dies (PR_SET_PDEATHSIG), and exits
/// at once if the parent is already gone (reparented between the spawn and this call).
inline void die_with_parent() {
    const char* parent = std::getenv("ATTNBENCH_PARENT_PID");
    if (!parent || std::to_string(::getppid()) != parent) return; // not a report's child
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (std::to_string(::getppid()) != parent) std::_Exit(130); // the parent died before prctl
}

/// What both mains do first: die_with_parent(), then `check_environment` (attn::check_omp_env),
/// before anything can call OpenMP -- libomp parses OMP_NUM_THREADS once, at its first call, and
/// on a value such as "", "1.5", "-1" or "nan" it asserts, aborts or hangs. False, after one line
/// "PROGRAM: error: why" on stderr, when the environment is refused (the main then exits 2).
template <class Check>
bool start_process(const char* program, Check&& check_environment) {
    die_with_parent(); // a report's child ends with the report, even one killed by SIGKILL
    try {
        check_environment();
    } catch (const std::exception& e) {
        std::fprintf(stderr, "%s: error: %s\n", program, e.what());
        return false;
    }
    return true;
}

/// Takes an exclusive lock on DIR/run.lock (flock: released when this process ends, however it
/// ends) for the rest of the process; throws attn::error if another process holds it.
void lock_run_dir(const std::string& dir);

/// Runs argv[0] (a path) with argv; stdout to `out_path`, stderr to `err_path` (each inherited
/// when empty; created or truncated otherwise); waits for it. Throws attn::error when it cannot start.
process_result run_process(const std::vector<std::string>& argv, const std::string& out_path = "",
                           const std::string& err_path = "");

/// The running executable's path (/proc/self/exe).
std::string self_exe();

} // namespace attn::cli
