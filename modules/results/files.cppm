// attn.results:files -- files written atomically.
module;
#include <string>
export module attn.results:files;

export namespace attn {

/// Writes `text` to `path` through a temporary file in the same directory renamed into place,
/// so `path` holds either its old content or all of `text`, never part of it. Creates parent
/// directories. Throws attn::error naming `path` on failure (and leaves no temporary behind).
void write_atomic(const std::string& path, const std::string& text);

} // namespace attn
