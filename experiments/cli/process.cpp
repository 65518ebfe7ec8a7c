// posix_spawn with redirected stdout/stderr (see process.hpp).
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>
#include <fcntl.h>
#include <sys/file.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>
#include "process.hpp"
import attn.core;

extern char** environ;

namespace attn::cli {

namespace {
volatile std::sig_atomic_t received = 0; // the signal this process was sent, 0 if none
volatile pid_t running_child = 0;        // the child run_process waits for, 0 if none

extern "C" void pass_on(int sig) {
    received = sig;
    if (const pid_t child = running_child; child > 0) ::kill(child, sig);
}
} // namespace

bool process_result::interrupted() const {
    return parent_signal || signal == SIGINT || signal == SIGTERM || signal == SIGHUP;
}

std::string exit_text(const process_result& r) {
    if (r.signal) return "killed by signal " + std::to_string(r.signal) + " (" + ::strsignal(r.signal) + ")";
    static const char* const meaning[] = {"done", "the work found a failure", "a usage or input error", "out of memory",
                                          "an internal error"};
    const std::string s = "exit status " + std::to_string(r.exit_code);
    if (r.exit_code >= 0 && r.exit_code <= 4) return s + " (" + meaning[r.exit_code] + ")";
    return r.exit_code == 130 ? s + " (interrupted)" : s;
}

void forward_signals() {
    struct sigaction sa{};
    sa.sa_handler = pass_on;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0; // no SA_RESTART: waitpid returns EINTR and waits again
    for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaction(sig, &sa, nullptr);
    ::setenv("ATTNBENCH_PARENT_PID", std::to_string(::getpid()).c_str(), 1); // see die_with_parent
}

void lock_run_dir(const std::string& dir) {
    std::filesystem::create_directories(dir);
    const std::string path = (std::filesystem::path(dir) / "run.lock").string();
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644); // kept open until exit
    require(fd >= 0, path + ": cannot open the run's lock file (" + std::strerror(errno) + ")");
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
        const int e = errno;
        ::close(fd);
        require(e != EWOULDBLOCK, dir + ": another attnbench report is running in this folder (it holds " + path +
                                      "); wait for it or use another --out");
        throw error(path + ": cannot lock (" + std::strerror(e) + ")");
    }
}

process_result run_process(const std::vector<std::string>& argv, const std::string& out_path,
                           const std::string& err_path) {
    require(!argv.empty(), "run_process: empty command");
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    if (!out_path.empty())
        posix_spawn_file_actions_addopen(&actions, 1, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (!err_path.empty())
        posix_spawn_file_actions_addopen(&actions, 2, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    process_result r;
    if (received) { // asked to stop: start nothing more
        posix_spawn_file_actions_destroy(&actions);
        r.parent_signal = received;
        return r;
    }
    const auto start = std::chrono::steady_clock::now();
    pid_t pid = 0;
    const int rc = posix_spawn(&pid, args[0], &actions, nullptr, args.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    require(rc == 0, "cannot start " + argv[0] + ": " + std::strerror(rc));
    running_child = pid;
    if (received) ::kill(pid, received); // a signal between the check above and the spawn
    int status = 0;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) throw error("waiting for " + argv[0] + ": " + std::strerror(errno));
    running_child = 0;
    r.parent_signal = received;
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (WIFEXITED(status))
        r.exit_code = WEXITSTATUS(status);
    else if (WIFSIGNALED(status))
        r.signal = WTERMSIG(status);
    // a child that cannot exec exits 127 from posix_spawn's child: say so
    require(!(r.exit_code == 127 && !std::filesystem::exists(argv[0])), "cannot start " + argv[0] + ": no such file");
    return r;
}

std::string self_exe() {
    std::error_code ec;
    auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
    require(!ec, "cannot find this executable's path (/proc/self/exe)");
    return p.string();
}

} // namespace attn::cli
