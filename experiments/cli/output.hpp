// Helpers the report-style subcommands share: grouped integers and files written atomically (a
// temporary file renamed into place) under --out. Tables are attn::text_table (attn.results):
// a file including this one imports attn.results after its #includes.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace attn::cli {

/// 1048576 -> "1,048,576".
inline std::string grouped(std::uint64_t v) {
    std::string s = std::to_string(v), out;
    for (std::size_t i = 0; i < s.size(); ++i) {
        if (i && (s.size() - i) % 3 == 0) out += ',';
        out += s[i];
    }
    return out;
}

/// Writes `content` to dir/name atomically (attn::write_atomic); returns the final path.
std::string write_atomic(const std::string& dir, const std::string& name, const std::string& content);

} // namespace attn::cli

#include <nlohmann/json.hpp>
namespace attn::cli {
/// The metadata block every results file carries (attn::collect_metadata: machine, compiler,
/// flags, commit, date, seed, threads) plus the command that wrote it.
nlohmann::json metadata(const std::string& command, std::uint64_t seed = 0, int threads = 1);
} // namespace attn::cli
