#!/usr/bin/env bash
# Installs everything attnbench needs on Debian 12, and nothing twice:
#   - Debian packages (compiler, libraries), with apt-get, as root;
#   - one Python environment from PyPI (scripts/requirements.txt: CMake, numpy, matplotlib,
#     scipy, Google Benchmark's Python bindings and the ONNX Runtime peer), a venv made from
#     PATH's python3 in a per-user cache shared by every clone on the machine, linked from the
#     checkout as .venv (git-ignored).
# As another user it prints the commands to run and exits 1. A second run prints one line.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
requirements=$root/scripts/requirements.txt

apt_packages=(
  clang-19 clang-tools-19 libomp-19-dev libclang-rt-19-dev clang-format-19 ninja-build git
  libxtensor-dev xtl-dev libxsimd-dev catch2 libbenchmark-dev libbenchmark-tools
  libopenblas-dev libcli11-dev nlohmann-json3-dev libtomlplusplus-dev
  slurm-wlm slurmctld slurmd munge
)
missing=()
for p in "${apt_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

# The venv is named by the interpreter's version and the requirements' hash, so a change to
# either makes a new one and an unchanged one is reused as it is.
python=$(command -v python3 || true)
if [ -z "$python" ]; then
  echo "setup: no python3 on PATH (3.11 or newer is needed to make the project's venv)" >&2
  exit 1
fi
python=$("$python" -c 'import sys; print(sys.executable)')
pyver=$("$python" -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])')
key=$( { echo "$python $pyver"; cat "$requirements"; } | sha256sum | cut -c1-12)
venv=${ATTNBENCH_VENV_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/attnbench}/venv-py$pyver-$key
venv_ok=0
[ -f "$venv/.attnbench-complete" ] && [ "$(readlink "$root/.venv" 2>/dev/null)" = "$venv" ] && venv_ok=1

if [ ${#missing[@]} -eq 0 ] && [ $venv_ok -eq 1 ]; then
  echo "setup: all dependencies present (venv $venv)"
  exit 0
fi

if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "setup: missing Debian packages: ${missing[*]}" >&2
    echo "run as root: apt-get update && apt-get install -y --no-install-recommends ${missing[*]}" >&2
    echo "then again: bash scripts/setup.sh" >&2
    exit 1
  fi
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if [ $venv_ok -eq 0 ]; then
  mkdir -p "$(dirname "$venv")"
  # One clone at a time builds a given venv; the others wait and then find it complete.
  exec 9>"$venv.lock"
  flock 9
  if [ ! -f "$venv/.attnbench-complete" ]; then
    echo "setup: making the Python environment $venv from $python ($pyver)"
    rm -rf "$venv"
    "$python" -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-input \
      --only-binary=:all: -r "$requirements"
    touch "$venv/.attnbench-complete"
  fi
  flock -u 9
  ln -sfn "$venv" "$root/.venv"
  "$root/.venv/bin/cmake" --version | head -1
  "$root/.venv/bin/python" -c 'import numpy, matplotlib, scipy, onnxruntime, google_benchmark; print("numpy", numpy.__version__, "matplotlib", matplotlib.__version__, "scipy", scipy.__version__, "onnxruntime", onnxruntime.__version__)'
fi
echo "setup: done"
