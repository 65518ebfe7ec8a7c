#!/usr/bin/env bash
# The peers in the project venv (.venv, made by scripts/setup.sh) from PyPI, pinned:
#   scripts/requirements.txt        onnxruntime + onnx (ort-attention; about 50 MB): set-up installs
#                                   them on every machine, so this only checks they are there
#   scripts/requirements-torch.txt  torch (torch-sdpa, torch-mha; CPU only, but PyPI's Linux wheel
#                                   pulls CUDA libraries: about 2.6 GB download, 4.6 GB installed)
# usage: bash scripts/peers.sh          both
#        bash scripts/peers.sh --ort    onnxruntime alone (set-up's)
#        bash scripts/peers.sh --torch  torch alone
# Installs nothing that is already there (a second run prints one line per peer).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
groups=(ort torch)
case "${1:-}" in
  "") ;;
  --ort) groups=(ort) ;;
  --torch) groups=(torch) ;;
  *) echo "peers.sh: unknown option '$1' (use --ort, --torch or nothing for both)" >&2; exit 2 ;;
esac
bash "$root/scripts/setup.sh" >/dev/null
py=$root/.venv/bin/python
for g in "${groups[@]}"; do
  if [ "$g" = ort ]; then
    "$py" -c "import onnxruntime; print('peers: onnxruntime', onnxruntime.__version__, '(installed by setup.sh)')"
    continue
  fi
  req=$root/scripts/requirements-torch.txt
  want=$(grep -m1 -E "^torch==" "$req" | sed 's/.*==//; s/ .*//')
  have=$("$py" -c "import importlib.metadata as m; print(m.version('torch'))" 2>/dev/null || true)
  if [ "$have" = "$want" ]; then
    echo "peers: torch $have already installed"
    continue
  fi
  echo "peers: installing torch $want from PyPI ($req)"
  "$py" -m pip install --quiet --disable-pip-version-check --no-input --only-binary=:all: \
    -r "$req" -c "$root/scripts/requirements.txt"
  "$py" -c "import torch; print('peers: torch', torch.__version__)"
done
