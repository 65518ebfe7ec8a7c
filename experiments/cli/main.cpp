// attnbench: research benchmark suite for transformer attention. Each subcommand lives in
// its own file of experiments/cli/; bad input is one line on stderr and exit status 2.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <new>
#include <omp.h>
#include <CLI/CLI.hpp>
#include "commands.hpp"
#include "numbers.hpp"
#include "process.hpp"
import attn.core;

int main(int argc, char** argv) {
    // first, before anything can call OpenMP (no subcommand calls it while it is registered)
    if (!attn::cli::start_process("attnbench", attn::check_omp_env)) return 2;
    CLI::App app{"attnbench: a benchmark suite for transformer attention"};
    app.require_subcommand(1);
    attn::cli::add_list(app);
    attn::cli::add_run(app);
    attn::cli::add_init(app);
    attn::cli::add_check(app);
    attn::cli::add_peak(app);
    attn::cli::add_env(app);
    attn::cli::add_params(app);
    attn::cli::add_flops(app);
    attn::cli::add_toy(app);
    attn::cli::add_hull(app);
    attn::cli::add_claims(app);
    attn::cli::add_report(app);
    attn::cli::add_compare(app);
    attn::cli::add_merge(app);
    attn::cli::add_slurm(app);
    attn::cli::add_peer_io(app);
    attn::cli::strict_values(app);
    if (argc > 1 && argv[1][0] != '-') { // CLI11 would say only "A subcommand is required"
        bool known = false;
        for (const CLI::App* sub : app.get_subcommands({})) known = known || sub->check_name(argv[1]);
        if (!known) {
            std::fprintf(stderr, "attnbench: error: unknown subcommand '%s' (attnbench --help lists them)\n", argv[1]);
            return 2;
        }
    }
    try {
        // OMP_NUM_THREADS is a thread count too: OpenMP aborts where it cannot start the team
        attn::check_threads(std::size_t(omp_get_max_threads()), "OMP_NUM_THREADS");
        app.parse(argc, argv);
    } catch (const CLI::CallForHelp& e) {
        return app.exit(e);
    } catch (const CLI::ParseError& e) {
        app.exit(e);
        return 2;
    } catch (const attn::cli::exit_status& e) {
        return e.code;
    } catch (const attn::error& e) {
        std::fprintf(stderr, "attnbench: error: %s\n", e.what());
        return 2;
    } catch (const attn::out_of_memory& e) {
        std::fprintf(stderr, "attnbench: out of memory: %s\n", e.what());
        return 3;
    } catch (const std::bad_alloc&) {
        std::fprintf(stderr, "attnbench: out of memory: an allocation failed (std::bad_alloc)\n");
        return 3;
    } catch (const std::exception& e) { // not a refusal of the input: a bug, told apart from a failed check (1)
        std::fprintf(stderr, "attnbench: internal error: %s\n", e.what());
        return 4;
    }
    // Output that did not reach stdout (a closed pipe, a full disk) is a failure, not a success.
    if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
        std::fprintf(stderr, "attnbench: error: cannot write to standard output (%s)\n", std::strerror(errno));
        return 1;
    }
    return 0;
}
