// attn.results:files -- files written atomically, and files read whole (as text, or as JSON)
// with one error naming the path.
module;
#include <string>
#include <nlohmann/json.hpp>
export module attn.results:files;

export namespace attn {

// The output-path rule, for every file the suite writes:
//  - a path is never empty; it names a regular file or nothing yet. An existing FIFO, device,
//    socket, directory or symbolic link (to anything) is refused, never replaced or followed;
//  - an existing regular file is replaced whole (atomically) by the new content;
//  - the temporary lies beside the target (".NAME.tmp.PID.N", so the rename stays on one file
//    system) and is removed when the write fails;
//  - an output directory (--out DIR) is a directory or nothing yet, never a symbolic link; that
//    it can be made and written is checked before any work starts, by creating it and a file in
//    it and removing both again (check_output_dir).
// Each refusal is an attn::error naming the path and what it is.

/// Throws unless `path` may be written under the rule above.
void check_output_file(const std::string& path);

/// Throws unless `dir` may hold outputs; leaves the file system as it was.
void check_output_dir(const std::string& dir);

/// A fresh temporary name beside `path` under the rule above (".NAME.tmp.PID.N", N counting
/// this process's calls): for a writer that fills the temporary itself before renaming it.
std::string temporary_for(const std::string& path);

/// Writes `text` to `path` through a temporary file in the same directory renamed into place,
/// so `path` holds either its old content or all of `text`, never part of it. Creates parent
/// directories. Throws attn::error naming `path` on failure or refusal (check_output_file) and
/// leaves no temporary behind.
void write_atomic(const std::string& path, const std::string& text);

/// The whole file at `path`. Throws attn::error "PATH: cannot read (why)" when it cannot be
/// opened or read (a directory included).
std::string read_text(const std::string& path);

/// `text` as JSON (keys in their order). Throws attn::error "WHERE: not valid JSON (nlohmann's
/// reason)"; `where` names the source: a path, or a flag such as "--case".
nlohmann::ordered_json parse_json(const std::string& text, const std::string& where);

/// The JSON file at `path`: read_text, then parse_json naming the path.
nlohmann::ordered_json read_json(const std::string& path);

} // namespace attn
