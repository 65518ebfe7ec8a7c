// Helpers the report-style subcommands share: files written atomically (a temporary file renamed
// into place) under --out. Tables are attn::text_table and integers attn::grouped (attn.results):
// a file including this one imports attn.results after its #includes.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace attn::cli {

/// Writes `content` to dir/name atomically (attn::write_atomic); returns the final path.
std::string write_atomic(const std::string& dir, const std::string& name, const std::string& content);

} // namespace attn::cli

#include <nlohmann/json.hpp>
namespace attn::cli {
/// The metadata block every results file carries (attn::collect_metadata: machine, compiler,
/// flags, commit, date, seed, threads) plus the command that wrote it.
nlohmann::json metadata(const std::string& command, std::uint64_t seed = 0, int threads = 1);

/// A JSON array of objects as CSV: the columns are `keys`, or when none are given the objects'
/// keys in first-seen order; strings as they are, null empty, anything else as JSON writes it.
/// So a stage's CSV is its JSON, column for key.
std::string rows_csv(const nlohmann::ordered_json& rows, std::vector<std::string> keys = {});
} // namespace attn::cli
