#!/usr/bin/env bash
# MLA through the command line: `attnbench init --family mla` writes DeepSeek-named weights, `run
# --family mla` computes both forms, and an independent NumPy implementation (numpy_mla.py: the
# rotary embedding as complex products, its own RMSNorm and softmax) agrees, in f64 to 1e-12 and
# in fp32 through simd and parallel to 1e-5; with and without the query latent. Then the bad input
# the issue names, each one line naming the flag or file with the expected and found value, exit 2.
# usage: mla_cli.sh ATTNBENCH PYTHON WORKDIR
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh" # fail, refused
ab=$1 py=$2 work=$3
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
widths=(--heads 4 --kv-lora-rank 16 --qk-nope-head-dim 8 --qk-rope-head-dim 4 --v-head-dim 6)
for q in 0 8; do
    "$ab" init --family mla --d-model 32 "${widths[@]}" --q-lora-rank $q --seq 9 --batch 2 --out w$q >/dev/null ||
        fail "init --family mla --q-lora-rank $q"
    for form in naive absorb; do
        for run in "naive f64 1e-12" "simd f32 1e-5" "parallel f32 1e-5"; do
            set -- $run
            "$ab" run --family mla --form $form "${widths[@]}" --q-lora-rank $q --causal --variant $1 --precision $2 \
                --threads 2 --weights w$q/weights --input w$q/x.npy --out y.npy >/dev/null ||
                fail "run --family mla --form $form --variant $1 --q-lora-rank $q"
            "$py" "$here/numpy_mla.py" w$q/weights w$q/x.npy y.npy --kv-lora-rank 16 --qk-nope-head-dim 8 \
                --qk-rope-head-dim 4 --v-head-dim 6 --heads 4 --causal --tol $3 ||
                fail "MLA $form $1 $2 (q_lora_rank $q) disagrees with NumPy"
        done
    done
done
# bad input
refused 2 "--qk-rope-head-dim 3: the rotary part is rotated in pairs, so it must be even and >= 2" \
    "$ab" init --family mla --d-model 32 --heads 4 --kv-lora-rank 16 --qk-nope-head-dim 8 --qk-rope-head-dim 3 \
    --v-head-dim 6 --out bad1
refused 2 "--kv-lora-rank 0: the key/value latent width must be >= 1" \
    "$ab" init --family mla --d-model 32 --heads 4 --kv-lora-rank 0 --qk-nope-head-dim 8 --qk-rope-head-dim 4 \
    --v-head-dim 6 --out bad2
refused 2 "--v-head-dim 0: the value head width must be >= 1" \
    "$ab" params --family mla --d-model 32 --heads 4 --kv-lora-rank 16 --qk-nope-head-dim 8 --qk-rope-head-dim 4
cp -r w0 wrong && "$py" -c "import numpy as np; np.save('wrong/weights/wkv_b.weight.npy', np.zeros((5, 16)))"
refused 2 "wrong/weights/wkv_b.weight.npy: shape \(5, 16\), expected \(56, 16\) = \[heads\*\(qk_nope_head_dim\+v_head_dim\), kv_lora_rank\]" \
    "$ab" run --family mla "${widths[@]}" --weights wrong/weights --input w0/x.npy --out y2.npy
cp w0/weights/wkv_b.weight.npy wrong/weights/ && rm wrong/weights/wo.weight.npy
refused 2 "wrong/weights/wo.weight.npy: missing \(MLA's weight set with q_lora_rank=0 needs it\)" \
    "$ab" run --family mla "${widths[@]}" --weights wrong/weights --input w0/x.npy --out y2.npy
refused 2 "w0/weights/wq.weight.npy: present, but q_lora_rank=8 means wq_a/q_norm/wq_b, not wq" \
    "$ab" run --family mla "${widths[@]}" --q-lora-rank 8 --weights w0/weights --input w0/x.npy --out y2.npy
refused 2 "--kv-lora-rank, --q-lora-rank, --qk-nope-head-dim, --qk-rope-head-dim and --v-head-dim are MLA's: give --family mla" \
    "$ab" run --heads 4 --kv-lora-rank 16 --weights w0/weights --input w0/x.npy --out y2.npy
refused 2 "give either --config deepseek-v2-lite or the MLA widths, not both" \
    "$ab" params --family mla --config deepseek-v2-lite --kv-lora-rank 16
refused 2 "unknown MLA configuration 'deepseek-v9' \(known: deepseek-v2, deepseek-v3, deepseek-v2-lite\)" \
    "$ab" params --family mla --config deepseek-v9
[ ! -e y2.npy ] || fail "a refused run wrote its output"
echo "mla_cli ok"
