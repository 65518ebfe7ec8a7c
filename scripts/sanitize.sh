#!/usr/bin/env bash
# Sanitizers and fuzzing, as CI runs them: builds the asan preset (ASan + UBSan, every finding
# fatal, and the libFuzzer targets), runs the whole ctest suite under it, then runs each fuzz
# target for a bounded time from its committed seed corpus (tests/fuzz/corpus/<target>).
# Exits non-zero on any finding; a crashing input is left in build/asan/fuzz-work/<target>/.
# The asan preset builds without the CUDA kernels (ATTNBENCH_CUDA=OFF: nvcc's code is not
# instrumented, and the release build, which CI also runs, compiles them), and without tests/cuda
# (ATTNBENCH_CUDA_TESTS=OFF: the CUDA backend's host-side arithmetic, tested by the release build).
# Usage: scripts/sanitize.sh [seconds per fuzz target, default 60]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
seconds=${1:-60}
t0=$SECONDS
build=$(bash "$root/scripts/build.sh" asan)
t_build=$((SECONDS - t0))

cd "$root"
# clang-19's ASan looks for llvm-symbolizer only beside itself (llvm-19, not installed); any
# llvm-symbolizer reads its debug information, and without one reports carry bare addresses.
ASAN_SYMBOLIZER_PATH=${ASAN_SYMBOLIZER_PATH:-$(command -v llvm-symbolizer-19 || command -v llvm-symbolizer || true)}
export ASAN_SYMBOLIZER_PATH
t0=$SECONDS
status=0
# Tests left to the release suite, to keep CI inside its budget (each adds nothing for ASan to
# find that the tests run here miss):
#  - the exhaustive conversion sweeps (every bf16/f16 bit pattern and rounding midpoint, 1.2M
#    assertions of scalar arithmetic);
#  - slurm.array (its time is spent waiting on slurmctld; slurm.shard_cli drives the same CLI);
#  - the torch peer's tests and the report over every peer (their time is spent in PyTorch,
#    which ASan does not instrument; the C++ they drive, peer-io and the report's peer stage,
#    runs here under peer.ort-attention, peer.fault.scale, peer.fault.kv-heads and peer.judge),
#    and peer.fault.scale.bf16/.f16 (the same C++ in the narrower types, 24 s under ASan);
#  - report.resume and cli.resources (63 s under ASan, spent starting processes: report.signals,
#    which runs here, drives --resume too; cli.resources starts four binaries dozens of times with
#    bad thread counts, sizes and environment values, nearly all refused before any kernel runs);
#  - report.latent, report.window_flag, report.local and report.new_field (about 180 s under ASan,
#    most of it in kernels the Catch2 suite runs here over the same families and windows): the
#    report's own code, sweep to figures, runs here under report.tiny, report.decode,
#    report.real_harness and report.signals.
release_only='rounds to nearest even|every (bf16|f16) bit pattern|^slurm\.array$|^peer\.torch-|^report\.peers$|^report\.resume$|^cli\.resources$|^peer\.fault\.scale\.(bf16|f16)$|^report\.(latent|window_flag|local|new_field)$'
.venv/bin/ctest --preset asan -j2 -E "$release_only" || status=$?
t_test=$((SECONDS - t0))

# The fuzzers run with the test preset's sanitizer options (see CMakePresets.json).
# OpenMP needs no suppression or option: LLVM's libomp is not instrumented, but its worker threads
# are pthreads that ASan intercepts and it frees what it allocates at exit, so the suite (the
# threaded variants at 1 and 2 threads included) runs clean with leak detection on.
eval "$(.venv/bin/python - <<'PY'
import json, shlex
env = next(p for p in json.load(open("CMakePresets.json"))["testPresets"] if p["name"] == "asan")["environment"]
print("\n".join(f"export {k}={shlex.quote(v.replace('${sourceDir}', '.'))}" for k, v in env.items()))
PY
)"
t0=$SECONDS
for target in npy sweep case; do
  work="$build/fuzz-work/$target"
  rm -rf "$work" && mkdir -p "$work/new"
  # new inputs go to a scratch folder; the committed corpus is only read
  if ! "$build/fuzz/fuzz_$target" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
      -print_final_stats=1 -artifact_prefix="$work/" "$work/new" "tests/fuzz/corpus/$target" \
      >"$work/log.txt" 2>&1; then
    echo "sanitize: fuzz_$target found something: $work/log.txt" >&2
    tail -40 "$work/log.txt" >&2
    status=1
  fi
  grep -E "^stat::number_of_executed_units|^stat::peak_rss_mb" "$work/log.txt" | sed "s/^/sanitize: fuzz_$target /" || true
done
t_fuzz=$((SECONDS - t0))
echo "sanitize: asan build ${t_build}s, ctest ${t_test}s, fuzzing ${t_fuzz}s (${seconds}s per target); status $status"
exit "$status"
