#!/usr/bin/env bash
# Compiles the instruction-set-specific code -- the kernels' partitions (attn.kernels:isa has a
# section per instruction set) and attn.peak's probes -- once per section, whatever this machine
# is: -march=x86-64-v4 (AVX-512), x86-64-v3 (AVX2, FMA, F16C) and x86-64 (SSE2: the generic
# section). A build with -march=native compiles one of them; this keeps the other two building.
# Compile only: nothing here runs the code. About 80 s per -march on 2 cores.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
bash scripts/setup.sh >&2
objs=()
for f in modules/kernels/*.cppm; do objs+=("CMakeFiles/attn_kernels.dir/$f.o"); done
for f in modules/results/peak/*.cpp; do objs+=("CMakeFiles/attn_results.dir/$f.o"); done
# The ISA sections are chosen by xsimd's XSIMD_WITH_* macros and __F16C__ alone: a -march that
# sets them as -march=native does compiles the section the release build compiled (AVX2 on a Zen
# 3, AVX-512 on a Zen 4), and is left out here.
isa_signature() {
    printf '#include <xsimd/config/xsimd_config.hpp>\nsig XSIMD_WITH_SSE2 XSIMD_WITH_SSE4_2 XSIMD_WITH_AVX XSIMD_WITH_AVX2 XSIMD_WITH_FMA3_AVX2 XSIMD_WITH_AVX512F XSIMD_WITH_AVX512CD XSIMD_WITH_AVX512DQ XSIMD_WITH_AVX512BW\n#ifdef __F16C__\nf16c\n#endif\n' |
        clang++-19 -std=c++20 -march="$1" -E -P -x c++ - | grep -A1 '^sig' | tr '\n' ' '
}
native=$(isa_signature native)
for march in x86-64-v4 x86-64-v3 x86-64; do
    if [ "$(isa_signature "$march")" = "$native" ]; then
        echo "isa_check: -march=$march selects the sections -march=native does (the release build compiles them)"
        continue
    fi
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
