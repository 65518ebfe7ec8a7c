// attnbench list: the registered variants, one line each.
#include <cstdio>
#include <string>
#include "commands.hpp"
import attn.variants;

namespace attn::cli {

void add_list(CLI::App& app) {
    auto* cmd = app.add_subcommand("list", "list the registered implementations");
    cmd->callback([] {
        std::printf("%-10s %-16s %-8s %s\n", "variant", "precisions", "threads", "description");
        for (const auto& v : registry()) {
            std::string prec;
            for (const precision p : all_precisions)
                if (v.supports(p)) prec += (prec.empty() ? "" : " ") + std::string(enum_name(p));
            std::printf("%-10s %-16s %-8s %s\n", v.name.c_str(), prec.c_str(), v.threaded ? "yes" : "1",
                        v.description.c_str());
        }
    });
}

} // namespace attn::cli
