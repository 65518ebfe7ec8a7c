// The metadata block of the JSON the report-style subcommands write (see output.hpp).
#include <ctime>
#include <string>
#include "output.hpp"
import attn.count;

namespace attn::cli {

nlohmann::json metadata(const std::string& command) {
    const auto b = this_build();
    char when[32];
    const std::time_t now = std::time(nullptr);
    std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
    return {{"tool", "attnbench"},          {"command", command},
            {"commit", std::string(b.commit)}, {"compiler", std::string(b.compiler)},
            {"build_type", std::string(b.build_type)}, {"written_utc", when}};
}

} // namespace attn::cli
