#!/usr/bin/env bash
# Formats every C++ file git tracks with clang-format-19 (.clang-format); with --check it changes
# nothing and exits non-zero when a file is not formatted (what CI runs).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
bash scripts/setup.sh >/dev/null
mapfile -t files < <(git ls-files '*.cpp' '*.cppm' '*.hpp' '*.h')
if [ "${1:-}" = "--check" ]; then
  clang-format-19 --dry-run -Werror "${files[@]}"
  echo "format: ${#files[@]} files formatted as .clang-format says"
else
  clang-format-19 -i "${files[@]}"
fi
