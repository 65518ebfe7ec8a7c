#!/usr/bin/env bash
# The CUDA backend on a machine with a GPU (the lent H100: commands run in the repo root, nvcc,
# compute-sanitizer and PyTorch there, no package registries). Needs only nvcc, a host C++
# compiler, and CMake >= 3.28 if there is one (otherwise nvcc builds everything directly); the
# project's own toolchain (clang 19, the C++ modules, its venv) is not assumed.
#   bash scripts/gpu.sh [steps...]     steps: build test bench sanitize profile (default: all), run in that order
#   build     variants/cuda + tests/cuda, standalone, into $ATTN_GPU_BUILD (default /tmp/attn-gpu-build);
#             a lease carries binaries built here instead (ATTN_GPU_BUILD=.gpubin, carry .gpubin/bin)
#   test      attn_cuda_gpu_tests: every kernel against the fp64 reference, mutants rejected
#   bench     attn_cuda_bench: the peak probes; cuda-flash and cuda-hopper (every tile) on the prefill
#             table (bf16, B x H >= 132, N 1k-16k, d 64 and 128, causal and not) and the windows;
#             cuda-decode's table against the measured read bandwidth; then torch's sdpa flash and
#             cuDNN backends and FlexAttention on the same shapes (tests/cuda/torch_peers.py)
#   sanitize  the tests at small sizes (--small): compute-sanitizer memcheck, racecheck per kernel
#   profile   Nsight Compute on cuda-hopper and cuda-flash at d 128, N 4k
#   suite     the suite's own binaries (attnbench, attnbench-bench; packed by scripts/device.sh pack,
#             .dev/ or .dev.tar.xz): attnbench report --preset gpu (the harness on the GPU, its report
#             and figures), attnbench check --device cuda, attnbench run --device cuda against NumPy
#             and on finite inputs that overflow fp32 (tests/interop/non_finite.sh cuda)
# Logs and CSVs go to $OUT (the device tool's output folder) or build/gpu-out, a table of the
# timings last. Every step runs under a timeout; ATTN_GPU_DEADLINE (epoch seconds) shortens the
# steps to end before it and skips those with no time left, so one lease call holds them all.
# Exit status: 0 when every step that ran passed.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=${OUT:-$root/build/gpu-out}
build=${ATTN_GPU_BUILD:-/tmp/attn-gpu-build}
jobs=${ATTN_GPU_JOBS:-$(nproc)} # parallel compiles (set 1 on a shared machine)
mkdir -p "$out" "$build"
steps=("$@")
[ ${#steps[@]} -eq 0 ] && steps=(build test bench sanitize profile)
status=0
summary=()

note() { echo "gpu.sh: $*" >&2; }
want() {
  local s
  for s in "${steps[@]}"; do [ "$s" = "$1" ] && return 0; done
  return 1
}
record() { # record NAME RC (77: skipped, no usable GPU)
  case $2 in
  0) summary+=("$1: pass") ;;
  77) summary+=("$1: skipped") ;;
  *) summary+=("$1: FAIL (exit $2)") && status=1 ;;
  esac
}

command -v nvcc >/dev/null || { note "nvcc not found"; exit 2; }
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader >"$out/device.txt" 2>&1 || true
nvcc --version | tail -1 >>"$out/device.txt"
bin=$build/bin

build_cmake() {
  local gen=()
  command -v ninja >/dev/null && gen=(-G Ninja)
  mkdir -p "$build/driver"
  cat >"$build/driver/CMakeLists.txt" <<EOF
cmake_minimum_required(VERSION 3.28)
project(attn_cuda_standalone LANGUAGES CXX)
enable_testing()
add_subdirectory($root/variants/cuda cuda)
add_subdirectory($root/tests/cuda tests)
EOF
  cmake -S "$build/driver" -B "$build/cmake" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DATTNBENCH_CUDA=ON &&
    cmake --build "$build/cmake" -j "$jobs" &&
    mkdir -p "$bin" &&
    cp "$build/cmake/tests/attn_cuda_gpu_tests" "$build/cmake/tests/attn_cuda_bench" "$bin/"
}

build_nvcc() { # without CMake: the same flags as variants/cuda/CMakeLists.txt
  # ATTN_GPU_ARCHS="90a": one target only (binaries half the size, for a lease's 64 MiB carry)
  local arch flags=(-std=c++17 -O3 -lineinfo --expt-relaxed-constexpr -Xcompiler -Wall -Xcompiler -Wextra
    -I "$root/variants/cuda" -I "$root/modules/core")
  for arch in ${ATTN_GPU_ARCHS:-80 90a}; do flags+=("-gencode=arch=compute_$arch,code=sm_$arch"); done
  local cxx=${CXX:-$(command -v g++ || command -v c++ || command -v clang++)}
  local objs=() pids=() f
  mkdir -p "$build/obj" "$bin"
  # every .cu of variants/cuda (a list written out here missed query.cu once: attn::cuda::query undefined)
  for f in $(cd "$root/variants/cuda" && ls *.cu | sed 's/\.cu$//'); do
    if [ "$jobs" -gt 1 ]; then
      while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n; done
      nvcc "${flags[@]}" -c "$root/variants/cuda/$f.cu" -o "$build/obj/$f.o" &
      pids+=($!)
    else
      nvcc "${flags[@]}" -c "$root/variants/cuda/$f.cu" -o "$build/obj/$f.o" || return 1
    fi
    objs+=("$build/obj/$f.o")
  done
  "$cxx" -std=c++17 -O2 -Wall -Wextra -I "$root/modules/core" -c "$root/variants/cuda/refusal.cpp" -o "$build/obj/refusal.o" || return 1
  for f in "${pids[@]}"; do wait "$f" || return 1; done
  objs+=("$build/obj/refusal.o")
  # each program from its files: test_cuda_gpu*.cpp, bench_cuda*.cpp (a list written out missed files once)
  for f in test_cuda_gpu:attn_cuda_gpu_tests bench_cuda:attn_cuda_bench; do
    nvcc -std=c++17 -O2 -Xcompiler -Wall -Xcompiler -Wextra -I "$root/variants/cuda" -I "$root/modules/core" "$root/tests/cuda/${f%%:*}"*.cpp "${objs[@]}" \
      -ldl -lpthread -o "$bin/${f##*:}" || return 1
  done
}

if want build; then
  start=$SECONDS
  if command -v cmake >/dev/null &&
    printf '%s\n' 3.28 "$(cmake --version | head -1 | awk '{print $3}')" | sort -V -C; then
    note "building with $(cmake --version | head -1)"
    build_cmake >"$out/build.log" 2>&1
  else
    note "no CMake >= 3.28: building with nvcc directly"
    build_nvcc >"$out/build.log" 2>&1
  fi
  rc=$?
  note "build: exit $rc in $((SECONDS - start)) s (log: $out/build.log)"
  grep -iE "warning|error" "$out/build.log" | head -20 >&2
  record build $rc
  [ $rc -eq 0 ] || { printf '%s\n' "${summary[@]}"; exit 1; }
fi

# step NAME CAP LOG CMD...: CMD under a timeout of CAP seconds, or less before $ATTN_GPU_DEADLINE
# (epoch seconds: the lease's end; a step with under 10 s left is not started), output to LOG
deadline=${ATTN_GPU_DEADLINE:-0}
step() {
  local name=$1 cap=$2 log=$3 start=$SECONDS rc
  shift 3
  if [ "$deadline" -gt 0 ]; then
    local left=$((deadline - $(date +%s)))
    [ "$left" -lt "$cap" ] && cap=$left
    if [ "$cap" -lt 10 ]; then
      note "$name: not started, the deadline is near"
      summary+=("$name: not run (deadline)")
      return 0
    fi
  fi
  timeout "$cap" "$@" >"$log" 2>&1
  rc=$?
  note "$name: exit $rc in $((SECONDS - start)) s (limit $cap s)"
  record "$name" $rc
}

if want test; then
  step "gpu tests" 150 "$out/gpu_tests.log" "$bin/attn_cuda_gpu_tests"
  grep -E "^(FAIL|device|skipped|cuda-hopper)|passed, " "$out/gpu_tests.log" | head -40 >&2
fi

# the order gives a short lease the most: ours timed, the peers that need no compiling, memcheck
# and racecheck on the new kernels, FlexAttention (torch.compile), the older kernels' racecheck
torch_ok=0
python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null && torch_ok=1
have_sanitizer=0
command -v compute-sanitizer >/dev/null && have_sanitizer=1
racecheck() {
  local k
  for k in "$@"; do
    step "racecheck $k" 120 "$out/racecheck_$k.log" compute-sanitizer --tool racecheck --error-exitcode 99 "$bin/attn_cuda_gpu_tests" --small --only "$k"
  done
}

if want bench; then
  step "bench peak" 60 "$out/peak.csv" "$bin/attn_cuda_bench" peak 10
  step "bench flash" 150 "$out/flash.csv" "$bin/attn_cuda_bench" flash 10
  read_gbs=$(awk -F, '$1 == "read" {print $2}' "$out/peak.csv" 2>/dev/null) # the decode table's ceiling
  step "bench decode" 120 "$out/decode.csv" "$bin/attn_cuda_bench" decode 10 ${read_gbs:+"$read_gbs"}
  step "bench window" 60 "$out/window.csv" "$bin/attn_cuda_bench" window 10
  if [ $torch_ok = 1 ]; then
    step "torch prefill" 90 "$out/torch_prefill.csv" python3 "$root/tests/cuda/torch_peers.py" prefill 10
    step "torch decode" 60 "$out/torch_decode.csv" python3 "$root/tests/cuda/torch_peers.py" decode 10
  else
    note "python3 cannot import torch with CUDA: no peers beside"
  fi
fi

if want sanitize; then
  if [ $have_sanitizer = 1 ]; then
    step "memcheck" 150 "$out/memcheck.log" compute-sanitizer --tool memcheck --error-exitcode 99 "$bin/attn_cuda_gpu_tests" --small
    racecheck cuda-hopper cuda-decode # racecheck is slow (over 100 s for every kernel at once)
  else
    note "compute-sanitizer not found"
    record "compute-sanitizer" 127
  fi
fi

if want bench && [ $torch_ok = 1 ]; then
  step "torch window" 90 "$out/torch_window.csv" python3 "$root/tests/cuda/torch_peers.py" window 10
fi

if want sanitize && [ $have_sanitizer = 1 ]; then
  racecheck cuda-flash cuda-tiled
  grep -hE "ERROR SUMMARY|RACECHECK SUMMARY|passed, " "$out"/memcheck.log "$out"/racecheck_*.log >&2
fi

if want profile; then
  if command -v ncu >/dev/null; then
    # issue 47's profile: d 128, N 4096, not causal, each prefill kernel's first launch (its default tile)
    for kn in hopper_kernel flash_kernel; do
      step "ncu $kn" 60 "$out/ncu_$kn.txt" ncu --kernel-name "$kn" --launch-count 1 --section SpeedOfLight \
        --section Occupancy --section LaunchStats --section ComputeWorkloadAnalysis "$bin/attn_cuda_bench" shape 1 128 4096 0
      step "ncu $kn pipes" 60 "$out/ncu_${kn}_pipes.txt" ncu --kernel-name "$kn" --launch-count 1 \
        --metrics "regex:sm__pipe_tensor.*cycles_active.avg.pct_of_peak_sustained_active" "$bin/attn_cuda_bench" shape 1 128 4096 0
    done
  else
    note "ncu not found"
  fi
fi

if want suite; then
  if [ ! -d "$root/.dev" ] && [ -f "$root/.dev.tar.xz" ]; then tar -xJf "$root/.dev.tar.xz" -C "$root"; fi
  if [ -s "$root/.dev/source_dir" ]; then
    # the machine's own CUDA runtime and cuBLAS (the pack leaves them out), then the pack's libraries
    cudalibs=$(find /usr/local/cuda*/lib64 /usr/local/cuda*/targets/*/lib /usr/lib/x86_64-linux-gnu \
      $(python3 -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null) \
      -name 'libcublas.so.1[0-9]*' -o -name 'libcudart.so.1[0-9]*' 2>/dev/null | xargs -r -n1 dirname | sort -u | paste -sd:)
    export LD_LIBRARY_PATH="${cudalibs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    kept_build=$build # device.sh env sets build (the pack's build folder, for ctest)
    # shellcheck source=/dev/null
    source "$root/scripts/device.sh" env
    build=$kept_build
    ab="$root/.dev/bin/attnbench"
    # the report first (its check stage checks the swept kernels in every format they serve), then
    # every CUDA variant through check, then a layer through run against NumPy
    step "suite report" 330 "$out/suite_report.log" "$ab" report --preset gpu --out "$out/report_gpu"
    tail -5 "$out/suite_report.log" >&2
    w="$out/suite_run"
    rm -rf "$w" && "$ab" init --d-model 256 --heads 8 --kv-heads 2 --seq 33 --batch 2 --bias --out "$w" >/dev/null &&
      step "suite run" 60 "$out/suite_run.log" bash -c "'$ab' run --device cuda --variant cuda-tiled --weights '$w/weights' \
        --input '$w/x.npy' --heads 8 --kv-heads 2 --causal --out '$w/y.npy' &&
        python3 '$root/tests/interop/numpy_layer.py' '$w/weights' '$w/x.npy' '$w/y.npy' --heads 8 --kv-heads 2 --causal --tol 1e-4"
    # never a silent NaN: finite inputs of 1e30 through the CUDA variants, one line, exit 1, nothing written
    step "suite nonfinite" 60 "$out/suite_nonfinite.log" bash "$root/tests/interop/non_finite.sh" "$ab" python3 \
      "$out/suite_nonfinite" cuda
    step "suite check" 100 "$out/suite_check.log" "$ab" check --device cuda --mode all --precision f32,bf16,f16,int8 --out "$out/suite_check"
    grep -E "refused|passed|failed|FAIL" "$out/suite_check.log" | head -20 >&2
  else
    note "suite: no .dev (bash scripts/device.sh pack BUILD here, carry .dev.tar.xz)"
    record suite 127
  fi
fi

if want bench; then
  # the table: each kernel's best tile beside torch's backends; decode against the read probe
  python3 - "$out" >"$out/table.txt" <<'EOF' || note "table: python3 failed"
import csv, os, sys
out = sys.argv[1]
def rows(name):
    p = os.path.join(out, name)
    if not os.path.exists(p):
        return []
    return list(csv.DictReader(l for l in open(p) if l.strip() and not l.startswith(("#", "skipped", "error"))))
peak = {r["measure"]: float(r["value"]) for r in rows("peak.csv")}
tensor, read = peak.get("tensor", 0), peak.get("read", 0)
print(f"peak: bf16 GEMM {tensor:.0f} TFLOP/s, read {read:.0f} GB/s, copy {peak.get('copy', 0):.0f} GB/s")
best = {}  # (kernel, d, n, causal, window) -> the fastest tile's row
for r in rows("flash.csv") + rows("window.csv") + rows("torch_prefill.csv") + rows("torch_window.csv"):
    key = (r["kernel"], r["d"], r["n"], r["causal"], r["window"])
    if key not in best or float(r["ms"]) < float(best[key]["ms"]):
        best[key] = r
kernels = ["cuda-flash", "cuda-hopper", "sdpa-flash", "sdpa-cudnn", "torch-flex"]
shapes = sorted({k[1:] for k in best}, key=lambda s: (int(s[0]), int(s[3]), int(s[1]), int(s[2])))
print("prefill, bf16: TFLOP/s of each kernel's fastest tile (4 B H d x visible pairs / time)")
print(f"{'d':>4} {'N':>6} {'causal':>6} {'W':>5} | " + " ".join(f"{k:>11}" for k in kernels) + " | flash/sdpa-flash hopper/cudnn")
for s in shapes:
    got = {k: best.get((k,) + s) for k in kernels}
    cells = " ".join(f"{float(got[k]['tflops']):11.1f}" if got[k] else f"{'-':>11}" for k in kernels)
    def ratio(a, b):
        return f"{float(got[b]['ms']) / float(got[a]['ms']):.2f}" if got[a] and got[b] else "-"
    print(f"{s[0]:>4} {s[1]:>6} {s[2]:>6} {s[3]:>5} | {cells} | {ratio('cuda-flash', 'sdpa-flash'):>16} {ratio('cuda-hopper', 'sdpa-cudnn'):>13}")
print("decode: GB/s (bytes a step must read / time), % of the read probe")
for r in rows("decode.csv") + rows("torch_decode.csv"):
    gbs = float(r["gbs"])
    print(f"{r['kernel']:>11} {r['storage']:>5} B {r['batch']:>3} H {r['heads']:>3} G {r['kv_heads']:>3} n_q {r['n_q']} L {r['L']:>7} "
          f"{r.get('layout', ''):>11} {r.get('options', ''):>20} | {float(r['ms']):8.3f} ms {gbs:7.0f} GB/s {gbs / read if read else 0:5.0%}")
EOF
fi

printf '%s\n' "${summary[@]}"
[ -f "$out/table.txt" ] && want bench && cat "$out/table.txt" # the table last
exit $status
