#!/usr/bin/env bash
# Non-finite and out-of-domain values: a weight file holding NaN or Inf is refused like an input
# (one line naming the file, exit 2), and number flags refuse NaN, Inf and values outside their
# domain (CLI::Range alone lets NaN through).
# usage: non_finite.sh ATTNBENCH PYTHON WORKDIR
set -uo pipefail
ab=$1 py=$2 work=$3
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
fail() { echo "FAIL: $*"; exit 1; }
refused() { # refused REGEX CMD...: exit 2 and stderr matching REGEX
    local re=$1; shift
    "$@" >out.txt 2>err.txt; local rc=$?
    [ $rc -eq 2 ] || fail "$* exited $rc, expected 2: $(cat err.txt)"
    grep -Eq -- "$re" err.txt || fail "$*: stderr does not say '$re': $(cat err.txt)"
}
"$ab" init --d-model 8 --heads 2 --seq 3 --bias --out data >/dev/null || fail "init"
for f in q_proj_weight out_proj.bias; do
    cp -r data bad && "$py" - "bad/weights/$f.npy" <<'PY'
import sys, numpy as np
a = np.load(sys.argv[1]); a.flat[1] = np.nan; np.save(sys.argv[1], a)
PY
    refused "$f.npy holds a non-finite value \(nan\) at flat index 1" \
        "$ab" run --weights bad/weights --input data/x.npy --heads 2 --out y.npy
    [ ! -e y.npy ] || fail "an output was written from NaN weights"
    rm -rf bad
done
refused "--r-max: 'inf' must be a finite number" "$ab" hull --r-max inf
refused "--eps: 'nan' must be a finite number" "$ab" hull --eps nan
refused "--r-min: '-1' must be a finite number in \[1e-09, 1e\+06\]" "$ab" hull --r-min -1
refused "--alpha: 'nan' must be a finite number in \[0, 1\]" "$ab" compare --alpha nan a.json b.json
refused "--fma-seconds: 'nan' must be a finite number" "$ab" peak --fma-seconds nan
refused "--triad-mib: 'inf' must be a finite number" "$ab" peak --triad-mib inf
echo "non-finite ok"
