// Helpers the report-style subcommands share: plain-text tables, grouped integers, and files
// written atomically (a temporary file renamed into place) under --out.
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

inline std::string fixed(double v, int decimals) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
    return buf;
}

/// A text table: a header row, then rows of cells; the first column left-aligned, others right.
struct text_table {
    std::vector<std::string> header;
    std::vector<std::vector<std::string>> rows;

    void print(std::FILE* f = stdout) const {
        std::vector<std::size_t> w(header.size(), 0);
        auto widen = [&](const std::vector<std::string>& r) {
            for (std::size_t i = 0; i < r.size() && i < w.size(); ++i) w[i] = std::max(w[i], r[i].size());
        };
        widen(header);
        for (const auto& r : rows) widen(r);
        auto line = [&](const std::vector<std::string>& r) {
            std::string s;
            for (std::size_t i = 0; i < r.size() && i < w.size(); ++i) {
                const std::string pad(w[i] - r[i].size(), ' ');
                s += i == 0 ? r[i] + pad : "  " + pad + r[i];
            }
            std::fprintf(f, "%s\n", s.c_str());
        };
        line(header);
        std::size_t total = 0;
        for (auto x : w) total += x + 2;
        std::fprintf(f, "%s\n", std::string(total > 2 ? total - 2 : 0, '-').c_str());
        for (const auto& r : rows) line(r);
    }

    std::string csv() const {
        auto quote = [](std::string c) {
            // grouped integers ("1,048,576") are written plain in CSV
            if (!c.empty() && c.find_first_not_of("0123456789,") == std::string::npos)
                c.erase(std::remove(c.begin(), c.end(), ','), c.end());
            if (c.find_first_of(",\"\n") == std::string::npos) return c;
            std::string q = "\"";
            for (char ch : c) q += ch == '"' ? std::string("\"\"") : std::string(1, ch);
            return q + "\"";
        };
        std::string s;
        auto line = [&](const std::vector<std::string>& r) {
            for (std::size_t i = 0; i < r.size(); ++i) s += (i ? "," : "") + quote(r[i]);
            s += "\n";
        };
        line(header);
        for (const auto& r : rows) line(r);
        return s;
    }
};

/// Writes `content` to dir/name atomically (attn::write_atomic); returns the final path.
std::string write_atomic(const std::string& dir, const std::string& name, const std::string& content);

} // namespace attn::cli

#include <nlohmann/json.hpp>
namespace attn::cli {
/// The metadata block every results file carries (attn::collect_metadata: machine, compiler,
/// flags, commit, date, seed, threads) plus the command that wrote it.
nlohmann::json metadata(const std::string& command, std::uint64_t seed = 0, int threads = 1);
} // namespace attn::cli
