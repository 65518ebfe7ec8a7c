# What the shell tests share (tests/interop, tests/report, tests/slurm); a test sources it with
#   . "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# before it changes directory. Each helper fails the test with one line: "FAIL: what".

fail() { echo "FAIL: $*"; exit 1; }

# refused STATUS REGEX CMD...: CMD (stdin empty) exits STATUS and says REGEX on stderr in one
# message (at most two lines: CLI11 adds a "Run with --help" line to a usage error).
refused() {
    local want=$1 re=$2
    shift 2
    "$@" >out.txt 2>err.txt </dev/null
    local rc=$?
    [ $rc -eq "$want" ] || fail "$* exited $rc, expected $want: $(head -c 600 err.txt)"
    grep -Eq -- "$re" err.txt || fail "$*: stderr does not say '$re': $(head -c 600 err.txt)"
    [ "$(grep -c . err.txt)" -le 2 ] || fail "$*: more than one message: $(head -c 600 err.txt)"
}
