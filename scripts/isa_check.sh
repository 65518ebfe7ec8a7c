#!/usr/bin/env bash
# Compiles the instruction-set-specific code -- the kernels' partitions (attn.kernels:isa has a
# section per instruction set) and attn.peak's probes -- once per section, whatever this machine
# is: -march=x86-64-v4 (AVX-512), x86-64-v3 (AVX2, FMA, F16C) and x86-64 (SSE2: the generic
# section). A build with -march=native compiles one of them; this keeps the other two building.
# Compile only: nothing here runs the code. About 40 s per -march on 2 cores.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
bash scripts/setup.sh >&2
objs=()
for f in modules/kernels/*.cppm; do objs+=("CMakeFiles/attn_kernels.dir/$f.o"); done
for f in modules/results/peak/*.cpp; do objs+=("CMakeFiles/attn_results.dir/$f.o"); done
for march in x86-64-v4 x86-64-v3 x86-64; do
    dir=build/isa-$march
    # no CUDA and no tests: nothing built here needs them, and their configure checks were 9 s a -march
    flock /tmp/attnbench-build.lock .venv/bin/cmake --preset release -B "$dir" -DATTNBENCH_CUDA=OFF -DBUILD_TESTING=OFF \
        -DCMAKE_CXX_FLAGS_RELEASE="-O3 -march=$march -DNDEBUG" >/dev/null
    if ! flock /tmp/attnbench-build.lock .venv/bin/cmake --build "$dir" -j2 --target "${objs[@]}" >"$dir/isa_check.log" 2>&1; then
        grep -m5 -A3 'error' "$dir/isa_check.log" >&2 || tail -n 20 "$dir/isa_check.log" >&2
        echo "isa_check: the kernels do not compile with -march=$march (log: $dir/isa_check.log)" >&2
        exit 1
    fi
    echo "isa_check: -march=$march compiles"
done
