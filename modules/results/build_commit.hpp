// The commit the binaries were built from, defined in a source written at every build
// (modules/results/commit.cmake): HEAD (+"-dirty" where tracked files differ from it) or "unknown".
#pragma once

namespace attn::detail {
const char* build_commit();
}
