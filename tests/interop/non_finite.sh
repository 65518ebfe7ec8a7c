#!/usr/bin/env bash
# Non-finite and out-of-domain values: a weight file holding NaN or Inf is refused like an input
# (one line naming the file, exit 2), and number flags refuse NaN, Inf and values outside their
# domain (CLI::Range alone lets NaN through).
# With a fourth argument `cuda` (scripts/gpu.sh suite, on a machine with a GPU) the same overflow
# goes through the CUDA variants instead: cuda-naive and cuda-tiled in f32, cuda-flash in bf16.
# usage: non_finite.sh ATTNBENCH PYTHON WORKDIR [cuda]
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh" # fail, refused
ab=$1 py=$2 work=$3 device=${4:-cpu}
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
"$ab" init --d-model 8 --heads 2 --seq 3 --bias --out data >/dev/null || fail "init"
times_1e30() { # IN OUT: the input .npy times 1e30, as float64 (finite, but its scores overflow fp32)
    "$py" -c "import sys, numpy as np; np.save(sys.argv[2], np.load(sys.argv[1]).astype(np.float64) * 1e30)" "$1" "$2"
}
overflow_msg() { # the one line for N of N values from finite inputs of about 1e30
    echo "^attnbench: error: [0-9]+ of $1 output values are not finite \(NaN or Inf\) from finite inputs \(largest \|input\| [0-9.]+e\+(29|30)\): the scores likely overflow fp32 arithmetic's range; run with --precision f64"
}
if [ "$device" = cuda ]; then
    # d_model 32, H 2: d_head 16, which cuda-flash serves (multiples of 8)
    "$ab" init --d-model 32 --heads 2 --seq 3 --bias --out gpu >/dev/null || fail "init"
    times_1e30 gpu/x.npy gpu_big.npy || fail "scaling the input"
    for t in cuda-naive:f32 cuda-tiled:f32 cuda-flash:bf16; do
        refused 1 "$(overflow_msg 96)" "$ab" run --device cuda --variant "${t%%:*}" --precision "${t#*:}" \
            --weights gpu/weights --input gpu_big.npy --heads 2 --out y.npy
        [ ! -e y.npy ] || fail "run --variant ${t%%:*} wrote an output holding non-finite values"
    done
    echo "non-finite ok (cuda)"
    exit 0
fi
for f in q_proj_weight out_proj.bias; do
    cp -r data bad && "$py" - "bad/weights/$f.npy" <<'PY'
import sys, numpy as np
a = np.load(sys.argv[1]); a.flat[1] = np.nan; np.save(sys.argv[1], a)
PY
    refused 2 "$f.npy holds a non-finite value \(nan\) at flat index 1" \
        "$ab" run --weights bad/weights --input data/x.npy --heads 2 --out y.npy
    [ ! -e y.npy ] || fail "an output was written from NaN weights"
    rm -rf bad
done
# finite inputs whose scores overflow fp32 (|x| up to 1e30): never a silent NaN -- one line saying
# how many values, the largest input and the cause, exit 1, nothing written; f64 computes them
times_1e30 data/x.npy big.npy || fail "scaling the input"
for v in simd naive; do
    refused 1 "$(overflow_msg 24)" \
        "$ab" run --variant "$v" --weights data/weights --input big.npy --heads 2 --out y.npy
    [ ! -e y.npy ] || fail "run --variant $v wrote an output holding non-finite values"
done
"$ab" run --variant naive --precision f64 --weights data/weights --input big.npy --heads 2 --out y64.npy >/dev/null 2>&1 ||
    fail "run --precision f64 on inputs of 1e30 failed"
"$py" -c "import sys, numpy as np; y = np.load(sys.argv[1]); assert np.isfinite(y).all(), y" y64.npy ||
    fail "the f64 run's output is not finite"
refused 2 "--r-max: 'inf' must be a finite number" "$ab" hull --r-max inf
refused 2 "--eps: 'nan' must be a finite number" "$ab" hull --eps nan
refused 2 "--r-min: '-1' must be a finite number in \[1e-09, 1e\+06\]" "$ab" hull --r-min -1
refused 2 "--alpha: 'nan' must be a finite number in \[0, 1\]" "$ab" compare --alpha nan a.json b.json
refused 2 "--fma-seconds: 'nan' must be a finite number" "$ab" peak --fma-seconds nan
refused 2 "--triad-mib: 'inf' must be a finite number" "$ab" peak --triad-mib inf
# every float flag is finite, also where its own check is only "positive" (CLI11 lets NaN through)
for v in nan inf -inf 1e999; do
    refused 2 "--magnitude: '$v' is not a finite number" "$ab" peer-io --id-only --magnitude "$v" \
        --case '{"variant":"naive","mode":"core","d_model":8,"heads":2,"n_q":3}'
done
for v in 0 -1 1001; do
    refused 2 "peer-io: --magnitude .* is not a finite number in \(0, 1000\]" "$ab" peer-io --id-only --magnitude "$v" \
        --case '{"variant":"naive","mode":"core","d_model":8,"heads":2,"n_q":3}'
done
echo "non-finite ok"
