// posix_spawn with redirected stdout/stderr (see process.hpp).
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>
#include "process.hpp"
import attn.core;

extern char** environ;

namespace attn::cli {

bool process_result::interrupted() const {
    return signal == SIGINT || signal == SIGTERM || signal == SIGHUP || signal == SIGKILL;
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
    const auto start = std::chrono::steady_clock::now();
    pid_t pid = 0;
    const int rc = posix_spawn(&pid, args[0], &actions, nullptr, args.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    require(rc == 0, "cannot start " + argv[0] + ": " + std::strerror(rc));
    int status = 0;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) throw error("waiting for " + argv[0] + ": " + std::strerror(errno));
    process_result r;
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
