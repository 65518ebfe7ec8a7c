#!/usr/bin/env bash
# Installs the peers into the project venv (.venv, made by scripts/setup.sh) from PyPI, pinned:
#   scripts/requirements-ort.txt    onnxruntime + onnx (ort-attention; about 50 MB)
#   scripts/requirements-torch.txt  torch (torch-sdpa, torch-mha; CPU only, but PyPI's Linux wheel
#                                   pulls CUDA libraries: about 2.6 GB download, 4.6 GB installed)
# usage: bash scripts/peers.sh          both
#        bash scripts/peers.sh --ort    onnxruntime alone (what CI installs)
# Installs nothing that is already there (a second run prints one line per group).
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
  req=$root/scripts/requirements-$g.txt
  module=$([ "$g" = ort ] && echo onnxruntime || echo torch)
  want=$(grep -m1 -E "^$module==" "$req" | sed 's/.*==//; s/ .*//')
  have=$("$py" -c "import importlib.metadata as m; print(m.version('$module'))" 2>/dev/null || true)
  if [ "$have" = "$want" ]; then
    echo "peers: $module $have already installed"
    continue
  fi
  echo "peers: installing $module $want from PyPI ($req)"
  "$py" -m pip install --quiet --disable-pip-version-check --no-input --only-binary=:all: \
    -r "$req" -c "$root/scripts/requirements.txt"
  "$py" -c "import $module; print('peers: $module', $module.__version__)"
done
