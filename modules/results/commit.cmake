# cmake -DSOURCE_DIR=<tree> -DOUT=<file> -P commit.cmake: writes OUT, the definition of
# attn::detail::build_commit() (modules/results/build_commit.hpp): HEAD of SOURCE_DIR, with
# "-dirty" where tracked files differ from it, or "unknown" outside a git checkout. Target
# attn_commit runs it at every build, so results name the tree the binary was built from, not the
# one CMake last configured; OUT is replaced only when its text changes (an unchanged tree
# recompiles nothing).
execute_process(COMMAND git -C "${SOURCE_DIR}" rev-parse --short=12 HEAD
  RESULT_VARIABLE rc OUTPUT_VARIABLE commit OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
if(NOT rc EQUAL 0 OR NOT commit)
  set(commit unknown)
else()
  execute_process(COMMAND git -C "${SOURCE_DIR}" status --porcelain --untracked-files=no
    OUTPUT_VARIABLE changes OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(changes)
    string(APPEND commit "-dirty")
  endif()
endif()
file(WRITE "${OUT}.tmp" "// Generated at build time by modules/results/commit.cmake.\n#include \"${SOURCE_DIR}/modules/results/build_commit.hpp\"\n\nconst char* attn::detail::build_commit() { return \"${commit}\"; }\n")
file(COPY_FILE "${OUT}.tmp" "${OUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUT}.tmp")
