// attnbench slurm: a sweep as a Slurm job array, one shard per task (attnbench report --shard
// I/N), and a merge job that runs when every task has succeeded (--dependency=afterok). Slurm
// schedules; this writes the two batch scripts into the run folder and submits them with sbatch.
//
// Layout of DIR: sweep.toml (the sweep, copied: a later edit of the original does not reach
// running tasks), shards.sbatch, merge.sbatch, slurm/ (Slurm's logs), shard-I/ (each task's
// run), merged/ (the merge, rendered).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <sstream>
#include <string>
#include <vector>
#include <omp.h>
#include <unistd.h>
#include <CLI/CLI.hpp>
#include "commands.hpp"
#include "presets.hpp"
#include "report.hpp"

namespace attn::cli {
namespace {

using namespace reporting;

struct slurm_args {
    std::string sweep, preset, out, partition, time, bench;
    int array = 0, cpus = 0;
    bool dry_run = false;
};

/// A word for bash, single-quoted.
std::string quoted(const std::string& s) {
    std::string q = "'";
    for (char ch : s) q += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
    return q + "'";
}

/// The executable `name` on PATH, or "".
std::string on_path(const std::string& name) {
    const char* path = std::getenv("PATH");
    std::stringstream dirs(path ? path : "");
    for (std::string d; std::getline(dirs, d, ':');) {
        const fs::path p = fs::path(d.empty() ? "." : d) / name;
        if (fs::exists(p) && !fs::is_directory(p) && access(p.c_str(), X_OK) == 0) return p.string();
    }
    return "";
}

/// The CPUs a task needs: the largest thread count the sweep asks for; a grid with threads 0
/// (every CPU) runs at the task's CPUs, this machine's count unless --cpus-per-task says.
int cpus_needed(const sweep_spec& spec, int given) {
    std::size_t most = 1;
    bool every = false;
    for (const auto& g : spec.grids)
        for (auto t : g.threads) {
            every = every || t == 0;
            most = std::max(most, t);
        }
    if (given > 0) {
        require(std::size_t(given) >= most, "--cpus-per-task " + std::to_string(given) +
                                                " is below the sweep's largest thread count " + std::to_string(most));
        return given;
    }
    return int(every ? std::max<std::size_t>(most, std::size_t(omp_get_max_threads())) : most);
}

std::string header(const slurm_args& a, const std::string& name, const fs::path& dir) {
    std::string s = "#!/bin/bash\n#SBATCH --job-name=" + name + "\n#SBATCH --ntasks=1\n";
    if (!a.partition.empty()) s += "#SBATCH --partition=" + a.partition + "\n";
    if (!a.time.empty()) s += "#SBATCH --time=" + a.time + "\n";
    return s + "#SBATCH --chdir=" + dir.string() + "\n";
}

void slurm(const slurm_args& a) {
    require(a.array >= 1, "--array " + std::to_string(a.array) + ": the number of shards must be at least 1");
    require(a.sweep.empty() || a.preset.empty(), "--preset and --sweep are exclusive: give one");
    require(!a.sweep.empty() || !a.preset.empty(), "give the sweep to split: --sweep FILE or --preset NAME");
    std::string text, source;
    if (!a.sweep.empty()) {
        require(fs::exists(a.sweep), a.sweep + ": cannot read the sweep file");
        text = read_text(a.sweep);
        source = a.sweep;
    } else {
        for (const auto& [n, t] : sweep_presets())
            if (n == a.preset) text = t;
        require(!text.empty(), "unknown preset '" + a.preset + "'");
        source = "preset:" + a.preset;
    }
    const sweep_spec spec = parse_sweep(text, source, stage_names());
    const int cpus = cpus_needed(spec, a.cpus);
    for (const auto& x : {a.partition, a.time})
        require(x.find_first_of(" \t\n'\"$`\\;") == std::string::npos,
                "--partition/--time '" + x + "' has a space or shell character");
    const std::string sbatch = a.dry_run ? "sbatch" : on_path("sbatch");
    require(!sbatch.empty(),
            "sbatch is not on PATH: submit from a Slurm login node (or pass --dry-run to see the scripts)");
    const fs::path dir = fs::absolute(
        a.out.empty() ? fs::path("results") / (spec.name + "-slurm-" + utc_stamp("%Y%m%d-%H%M%S")) : fs::path(a.out));
    require(a.dry_run || !fs::exists(dir / "shards.sbatch"),
            dir.string() + " holds a submitted sweep already; give another --out");
    const std::string self = self_exe(), n = std::to_string(a.array);
    const std::string bench = a.bench.empty() ? "" : " --bench " + quoted(fs::absolute(a.bench).string());

    std::string shards = header(a, "attnbench-" + spec.name, dir);
    shards += "#SBATCH --array=0-" + std::to_string(a.array - 1) + "\n#SBATCH --cpus-per-task=" + std::to_string(cpus) +
              "\n#SBATCH --output=" + (dir / "slurm" / "shard-%a-%A.out").string() +
              "\n# One shard of the sweep per array task (attnbench report --shard I/" + n +
              "). OMP_NUM_THREADS is the task's CPUs, so a\n"
              "# grid's threads = 0 means the same count on every task and every task expands the same case list.\n"
              "# Run one task again with: sbatch --array=I " +
              (dir / "shards.sbatch").string() +
              " (it resumes its shard).\n"
              "set -euo pipefail\n"
              "i=${SLURM_ARRAY_TASK_ID:?run this as a Slurm array task}\n"
              "export OMP_NUM_THREADS=${SLURM_CPUS_PER_TASK:-" +
              std::to_string(cpus) +
              "}\n"
              "out=" +
              quoted((dir / "shard-").string()) +
              "$i\n"
              "if [ -e \"$out/run.json\" ]; then\n"
              "    exec " +
              quoted(self) + " report --resume --shard \"$i/" + n + "\" --out \"$out\"" + bench +
              "\n"
              "fi\n"
              "exec " +
              quoted(self) + " report --sweep " + quoted((dir / "sweep.toml").string()) + " --shard \"$i/" + n +
              "\" --out \"$out\"" + bench + "\n";
    std::string merge = header(a, "attnbench-" + spec.name + "-merge", dir);
    merge += "#SBATCH --cpus-per-task=1\n#SBATCH --output=" + (dir / "slurm" / "merge-%j.out").string() +
             "\n# Runs when every shard task has succeeded (sbatch --dependency=afterok:ARRAY_JOB). merged/ is\n"
             "# made from the shards alone and is rebuilt on each run.\n"
             "set -euo pipefail\n"
             "rm -rf " +
             quoted((dir / "merged").string()) + "\n" + quoted(self) + " merge " + quoted((dir / "merged").string());
    for (int i = 0; i < a.array; ++i) merge += " " + quoted((dir / ("shard-" + std::to_string(i))).string());
    merge += "\nexec " + quoted(self) + " plot " + quoted((dir / "merged").string()) + "\n";

    if (a.dry_run) {
        std::printf(
            "# %s\n%s\n# %s\n%s\n# sbatch --parsable %s\n# sbatch --parsable --dependency=afterok:ARRAY_JOB %s\n",
            (dir / "shards.sbatch").string().c_str(), shards.c_str(), (dir / "merge.sbatch").string().c_str(),
            merge.c_str(), (dir / "shards.sbatch").string().c_str(), (dir / "merge.sbatch").string().c_str());
        return;
    }
    fs::create_directories(dir / "slurm");
    attn::write_atomic((dir / "sweep.toml").string(), text);
    attn::write_atomic((dir / "shards.sbatch").string(), shards);
    attn::write_atomic((dir / "merge.sbatch").string(), merge);
    auto submit = [&](std::vector<std::string> argv, const std::string& log) {
        const fs::path out = dir / "slurm" / (log + ".out"), err = dir / "slurm" / (log + ".err");
        const auto r = run_process(argv, out.string(), err.string());
        const std::string id = read_text(out).substr(0, read_text(out).find_first_of(";\n"));
        require(r.exit_code == 0 && !id.empty() && id.find_first_not_of("0123456789") == std::string::npos,
                "sbatch failed (exit " + std::to_string(r.exit_code) + "): " + last_line(err));
        return id;
    };
    const std::string array = submit({sbatch, "--parsable", (dir / "shards.sbatch").string()}, "submit-shards");
    const std::string merged = submit(
        {sbatch, "--parsable", "--dependency=afterok:" + array, (dir / "merge.sbatch").string()}, "submit-merge");
    std::fprintf(stderr, "%s: %d shards of %s at %d CPUs per task; merged report: %s\n", dir.string().c_str(), a.array,
                 source.c_str(), cpus, (dir / "merged" / "report.md").string().c_str());
    std::printf("array_job %s\nmerge_job %s\ndir %s\n", array.c_str(), merged.c_str(), dir.string().c_str());
}

} // namespace

void add_slurm(CLI::App& app) {
    auto a = std::make_shared<slurm_args>();
    auto* cmd = app.add_subcommand("slurm", "run a sweep as a Slurm job array (one shard per task) plus a merge job");
    cmd->add_option("--sweep", a->sweep, "the sweep file (TOML)")->option_text("FILE");
    cmd->add_option("--preset", a->preset, "an embedded sweep instead (quick, full, decode)");
    cmd->add_option("--array", a->array, "the number of shards, one array task each")->required()->option_text("N");
    cmd->add_option("--partition", a->partition, "the Slurm partition (default: the cluster's)");
    cmd->add_option("--time", a->time, "each task's time limit, as sbatch takes it (e.g. 2:00:00)");
    cmd->add_option("--cpus-per-task", a->cpus, "CPUs per task (default: the sweep's largest thread count)")
        ->option_text("C");
    cmd->add_option("--out", a->out, "the run folder (default results/<name>-slurm-<UTC date>)")->option_text("DIR");
    cmd->add_option("--bench", a->bench, "the harness the tasks run (default: attnbench-bench next to attnbench)")
        ->option_text("PATH");
    cmd->add_flag("--dry-run", a->dry_run, "print the two batch scripts and the sbatch commands; submit nothing");
    cmd->callback([a] { slurm(*a); });
}

} // namespace attn::cli
