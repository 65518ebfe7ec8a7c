// The metadata block and atomic writes of the report-style subcommands (see output.hpp).
#include <cstdint>
#include <filesystem>
#include <string>
#include "output.hpp"
import attn.results;

namespace attn::cli {

nlohmann::json metadata(const std::string& command, std::uint64_t seed, int threads) {
    run_info run;
    run.seed = seed;
    run.threads = threads;
    nlohmann::json j = {{"tool", "attnbench"}, {"command", command}};
    for (const auto& [key, value] : collect_metadata(run)) j[key] = value;
    return j;
}

std::string write_atomic(const std::string& dir, const std::string& name, const std::string& content) {
    const std::string path = (std::filesystem::path(dir) / name).string();
    attn::write_atomic(path, content);
    return path;
}

} // namespace attn::cli
