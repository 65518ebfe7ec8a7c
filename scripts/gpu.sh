#!/usr/bin/env bash
# The CUDA backend on a machine with a GPU (the lent H100: commands run in the repo root, nvcc,
# compute-sanitizer and PyTorch there, no package registries). Needs only nvcc, a host C++
# compiler, and CMake >= 3.28 if there is one (otherwise nvcc builds everything directly); the
# project's own toolchain (clang 19, the C++ modules, its venv) is not assumed.
#   bash scripts/gpu.sh [steps...]     steps: build test sanitize bench (default: all four)
#   build     variants/cuda + tests/cuda, standalone, into $ATTN_GPU_BUILD (default /tmp/attn-gpu-build)
#   test      attn_cuda_gpu_tests: every kernel against the fp64 reference, mutants rejected
#   sanitize  the same tests at small sizes (--small) under compute-sanitizer memcheck and racecheck
#   bench     attn_cuda_bench: the peak probes, cuda-flash beside torch's sdpa flash backend (bf16,
#             B x H >= 132, N 1k-16k, d 64 and 128, causal and not), cuda-decode's GB/s against the
#             measured read bandwidth; a short table printed last
# Logs and CSVs go to $OUT (the device tool's output folder) or build/gpu-out. Exit status: 0 when
# every step that ran passed. Plan the lease: build + test + sanitize take a few minutes, bench
# about as long; run them as separate calls if one call would pass 10 minutes.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=${OUT:-$root/build/gpu-out}
build=${ATTN_GPU_BUILD:-/tmp/attn-gpu-build}
jobs=${ATTN_GPU_JOBS:-$(nproc)} # parallel compiles (set 1 on a shared machine)
mkdir -p "$out" "$build"
steps=("$@")
[ ${#steps[@]} -eq 0 ] && steps=(build test sanitize bench)
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
  local flags=(-std=c++17 -O3 -lineinfo --expt-relaxed-constexpr -Xcompiler -Wall -Xcompiler -Wextra
    "-gencode=arch=compute_80,code=sm_80" "-gencode=arch=compute_90a,code=sm_90a" -I "$root/variants/cuda" -I "$root/modules/core")
  local cxx=${CXX:-$(command -v g++ || command -v c++ || command -v clang++)}
  local objs=() pids=() f
  mkdir -p "$build/obj" "$bin"
  # every .cu of variants/cuda (a list written out here missed query.cu once: attn::cuda::query undefined)
  for f in $(cd "$root/variants/cuda" && ls *.cu | sed 's/\.cu$//'); do
    if [ "$jobs" -gt 1 ]; then
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
      -lcublas -lpthread -o "$bin/${f##*:}" || return 1
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

if want test; then
  start=$SECONDS
  "$bin/attn_cuda_gpu_tests" >"$out/gpu_tests.log" 2>&1
  rc=$?
  note "attn_cuda_gpu_tests: exit $rc in $((SECONDS - start)) s"
  grep -E "^(FAIL|device|skipped)|passed, " "$out/gpu_tests.log" | head -40 >&2
  record "gpu tests ($(tail -1 "$out/gpu_tests.log"))" $rc
fi

if want sanitize; then
  if command -v compute-sanitizer >/dev/null; then
    for tool in memcheck racecheck; do
      start=$SECONDS
      timeout 300 compute-sanitizer --tool "$tool" --error-exitcode 99 "$bin/attn_cuda_gpu_tests" --small \
        >"$out/$tool.log" 2>&1
      rc=$?
      note "compute-sanitizer $tool: exit $rc in $((SECONDS - start)) s"
      grep -E "ERROR SUMMARY|RACECHECK SUMMARY|passed, " "$out/$tool.log" | tail -3 >&2
      record "compute-sanitizer $tool" $rc
    done
  else
    note "compute-sanitizer not found"
    record "compute-sanitizer" 127
  fi
fi

if want bench; then
  "$bin/attn_cuda_bench" peak 10 >"$out/peak.csv" 2>&1 || record "bench peak" $?
  "$bin/attn_cuda_bench" flash 10 >"$out/flash.csv" 2>&1 || record "bench flash" $?
  read_gbs=$(awk -F, '$1 == "read" {print $2}' "$out/peak.csv" 2>/dev/null) # the decode table's ceiling
  decode_args=(decode 10)
  [ -n "$read_gbs" ] && decode_args+=("$read_gbs")
  "$bin/attn_cuda_bench" "${decode_args[@]}" >"$out/decode.csv" 2>&1 || record "bench decode" $?
  if python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
    # torch's flash backend alone (sdpa_kernel with one backend raises rather than falling back);
    # the same shapes, timing and L2 flush as attn_cuda_bench; n_q = n_kv, so torch's top-left
    # causal mask is the bottom-right one
    python3 - >"$out/torch.csv" 2>&1 <<'EOF' || note "torch comparison failed (see $out/torch.csv)"
import statistics, torch
import torch.nn.functional as F
from torch.nn.attention import sdpa_kernel, SDPBackend
dev = torch.device("cuda")
flush = torch.empty(2 * torch.cuda.get_device_properties(0).L2_cache_size, dtype=torch.uint8, device=dev)
print("kernel,storage,batch,heads,kv_heads,n,d,causal,ms,tflops")
for d in (64, 128):
    for n in (1024, 2048, 4096, 8192, 16384):
        for causal in (0, 1):
            h = 2048 // d
            b = max(16384 // n, -(-132 // h))
            q, k, v = (torch.rand(b, h, n, d, device=dev, dtype=torch.bfloat16) * 2 - 1 for _ in range(3))
            try:
                with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                    run = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=bool(causal))
                    for _ in range(3):
                        run()
                    times = []
                    for _ in range(10):
                        flush.zero_()
                        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                        s.record(); run(); e.record(); e.synchronize()
                        times.append(s.elapsed_time(e))
                ms = statistics.median(times)
                pairs = n * (n + 1) / 2 if causal else n * n
                print(f"sdpa-flash,bf16,{b},{h},{h},{n},{d},{causal},{ms:.4f},{4 * b * h * d * pairs / ms * 1e-9:.1f}")
            except Exception as ex:
                print(f"# sdpa-flash d {d} n {n} causal {causal}: {ex}")
            del q, k, v
            torch.cuda.empty_cache()
EOF
  else
    note "python3 cannot import torch with CUDA: no sdpa comparison"
  fi
  # the table: cuda-flash beside sdpa-flash; cuda-decode against the read probe
  python3 - "$out" >"$out/table.txt" <<'EOF' || note "table: python3 failed"
import csv, os, sys
out = sys.argv[1]
def rows(name):
    p = os.path.join(out, name)
    if not os.path.exists(p):
        return []
    return [r for r in csv.DictReader(l for l in open(p) if l.strip() and not l.startswith(("#", "skipped", "error")))]
peak = {r["measure"]: float(r["value"]) for r in rows("peak.csv")}
print(f"peak: bf16 GEMM {peak.get('tensor', 0):.0f} TFLOP/s, read {peak.get('read', 0):.0f} GB/s, copy {peak.get('copy', 0):.0f} GB/s")
torch_rows = {(r["n"], r["d"], r["causal"]): r for r in rows("torch.csv")}
print(f"{'d':>4} {'N':>6} {'causal':>6} {'B':>3} {'H':>3} | {'cuda-flash ms':>13} {'TFLOP/s':>8} | {'sdpa-flash ms':>13} {'TFLOP/s':>8} | ratio")
for r in rows("flash.csv"):
    t = torch_rows.get((r["n"], r["d"], r["causal"]))
    tm = f"{float(t['ms']):13.3f} {float(t['tflops']):8.1f}" if t else f"{'-':>13} {'-':>8}"
    ratio = f"{float(t['ms']) / float(r['ms']):.2f}" if t else "-"
    print(f"{r['d']:>4} {r['n']:>6} {r['causal']:>6} {r['batch']:>3} {r['heads']:>3} | {float(r['ms']):13.3f} {float(r['tflops']):8.1f} | {tm} | {ratio}")
read = peak.get("read", 0)
print(f"{'type':>5} {'B':>3} {'H':>3} {'G':>3} {'n_q':>3} {'L':>7} {'layout':>11} {'options':>16} {'chunks':>6} | {'ms':>8} {'GB/s':>7} | of read peak | plan")
for r in rows("decode.csv"):
    frac = f"{float(r['gbs']) / read:.0%}" if read else "-"
    print(f"{r.get('storage', ''):>5} {r['batch']:>3} {r['heads']:>3} {r['kv_heads']:>3} {r.get('n_q', '1'):>3} {r['L']:>7} {r.get('layout', ''):>11} {r.get('options', ''):>16} {r['chunks']:>6} | {float(r['ms']):8.3f} {float(r['gbs']):7.0f} | {frac:>12} | {r.get('plan', '')}")
EOF
fi

printf '%s\n' "${summary[@]}"
[ -f "$out/table.txt" ] && want bench && cat "$out/table.txt" # the table last
exit $status
