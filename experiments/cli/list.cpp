// attnbench list: the registered variants, one line each.
#include <cstdio>
#include "commands.hpp"
import attn.variants;

namespace attn::cli {

void add_list(CLI::App& app) {
    auto* cmd = app.add_subcommand("list", "list the registered implementations");
    cmd->callback([] {
        std::printf("%-10s %-9s %-8s %s\n", "variant", "precision", "threads", "description");
        for (const auto& v : registry()) {
            const char* prec = v.supports<double>() ? "f32 f64" : "f32";
            std::printf("%-10s %-9s %-8s %s\n", v.name.c_str(), prec, v.threaded ? "yes" : "1", v.description.c_str());
        }
    });
}

} // namespace attn::cli
