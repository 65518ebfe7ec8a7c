#!/usr/bin/env bash
# For a lent machine with many cores (no registries, no compiler of ours): builds nothing there.
#   bash scripts/device.sh pack BUILD   here: copies BUILD's binaries and every shared library they
#                                       load (ldd) into .dev/ (git-ignored through .git/info/exclude)
#   bash scripts/device.sh env          there (sourced): the loader path to .dev/lib, this checkout at
#                                       the source path compiled into the binaries, and its python3
#                                       (with numpy, matplotlib, torch, onnxruntime) as the project's
# Build for it here with -march=x86-64-v4 (bash scripts/device.sh build). Nothing in the suite or
# its CI depends on this script; it only makes a run on such a machine one command.
# sourced (env), it leaves the caller's shell options alone; run, it stops at the first error
if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then set -euo pipefail; fi
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
case "${1:-}" in
build) # the v4 preset: build/v4, -march=x86-64-v4
    bash "$root/scripts/build.sh" v4
    ;;
pack)
    build=${2:?usage: device.sh pack BUILD}
    cd "$root"
    exclude=$(git rev-parse --git-path info/exclude) && mkdir -p "$(dirname "$exclude")"
    grep -qx '/.dev/' "$exclude" 2>/dev/null || echo '/.dev/' >>"$exclude"
    rm -rf .dev && mkdir -p .dev/bin .dev/lib .dev/ctest
    bins=("$build/attnbench" "$build/attnbench-bench" "$build/tests/attn_tests")
    cp "${bins[@]}" .dev/bin/
    # ctest's files, so that the suite's tests run there against these binaries
    (cd "$build" && find . -name CTestTestfile.cmake -o -name 'attn_tests_*.cmake' | xargs cp --parents -t "$root/.dev/ctest")
    realpath --relative-to="$root" "$build" >.dev/build
    # the source path compiled into the binaries (attn::build().source_dir: plots and peers run
    # from there), which env recreates there
    sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$build/CMakeCache.txt" >.dev/source_dir
    [ -s .dev/source_dir ] || { echo "device.sh pack: $build/CMakeCache.txt names no source directory" >&2; exit 1; }
    # every library but the C and C++ runtimes (the machine's are newer, and its Python's torch
    # needs its own libstdc++) and CUDA's (the machine's own: gpu.sh's suite step finds them)
    ldd "${bins[@]}" | awk '/=> \//{print $3}' | sort -u |
        grep -Ev '/(libc|libm|libstdc\+\+|libgcc_s|ld-linux[^/]*|libcudart|libcublas[A-Za-z]*)\.so' |
        xargs -I{} cp -L {} .dev/lib/
    strip .dev/bin/* # a lease carries 64 MiB: the binaries without their symbols, then compressed
    grep -qx '/.dev.tar.xz' "$exclude" 2>/dev/null || echo '/.dev.tar.xz' >>"$exclude"
    tar -cJf .dev.tar.xz .dev
    du -sh .dev .dev.tar.xz
    ;;
env)
    if [ -e "$root/.venv/pyvenv.cfg" ]; then # it would overwrite this checkout's python and build
        echo "device.sh env: this checkout has its own venv (.venv); env is for the lent machine" >&2
        return 2 2>/dev/null || exit 2
    fi
    if [ ! -s "$root/.dev/source_dir" ]; then
        echo "device.sh env: no .dev/source_dir; run bash scripts/device.sh pack BUILD where you built" >&2
        return 2 2>/dev/null || exit 2
    fi
    export LD_LIBRARY_PATH="$root/.dev/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    export ATTNBENCH_PYTHON=${ATTNBENCH_PYTHON:-$(command -v python3)}
    src=$(cat "$root/.dev/source_dir") # the source path compiled into the binaries (pack wrote it)
    if [ ! -e "$src" ]; then mkdir -p "$(dirname "$src")" && ln -s "$root" "$src"; fi
    # the project's python, as the build recorded it: a wrapper (a venv's python reached through a
    # symbolic link elsewhere no longer finds its venv)
    mkdir -p "$root/.venv/bin" && printf '#!/bin/sh\nexec %s "$@"\n' "$ATTNBENCH_PYTHON" >"$root/.venv/bin/python"
    chmod +x "$root/.venv/bin/python"
    build="$root/$(cat "$root/.dev/build")" # the build's layout again, for ctest
    mkdir -p "$build/tests" && cp -r "$root/.dev/ctest/." "$build/"
    cp "$root/.dev/bin/attnbench" "$root/.dev/bin/attnbench-bench" "$build/" && cp "$root/.dev/bin/attn_tests" "$build/tests/"
    ;;
*)
    echo "usage: bash scripts/device.sh build | pack BUILD | env (sourced, on the lent machine)" >&2
    return 2 2>/dev/null || exit 2
    ;;
esac
