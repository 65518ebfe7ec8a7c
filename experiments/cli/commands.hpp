// The subcommands of `attnbench`, one file each in this folder; main.cpp adds them all.
#pragma once
#include <CLI/CLI.hpp>

namespace attn::cli {

/// Thrown by a subcommand to end with a status other than 0 without an error message
/// (e.g. `check` when a variant fails): main returns `code`.
struct exit_status {
    int code;
};

/// Checks for --out, applied while the flags are read, before any work: the output-path rule of
/// attn.results (check_output_dir: a directory or nothing, never "", a link or a device, and
/// writable; check_output_file: a regular file or nothing).
CLI::Validator output_dir();
CLI::Validator output_file();
/// A number flag's domain: finite (NaN and Inf refused, which CLI::Range lets through) and in [lo, hi].
CLI::Validator finite_in(double lo, double hi);

/// A thread-count flag: in [1, attn::thread_limit()] (0 too when `zero_ok`: every CPU).
CLI::Validator threads_in(bool zero_ok = false);

void add_list(CLI::App& app);
void add_run(CLI::App& app);
void add_init(CLI::App& app);
void add_check(CLI::App& app);
void add_peak(CLI::App& app);
void add_env(CLI::App& app);
void add_params(CLI::App& app);
void add_flops(CLI::App& app);
void add_toy(CLI::App& app);
void add_hull(CLI::App& app);
void add_claims(CLI::App& app);
void add_report(CLI::App& app); // and `plot`
void add_compare(CLI::App& app);
void add_merge(CLI::App& app); // joins the shards of `report --shard I/N`
void add_slurm(CLI::App& app); // a sweep as a Slurm job array
void add_peer_io(CLI::App& app);

} // namespace attn::cli
