// attn.results:table -- format_bytes, format_number, text_table.
module;
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>
module attn.results;

namespace attn {

namespace {

std::size_t display_width(const std::string& s) {
    std::size_t n = 0;
    for (unsigned char c : s) n += (c & 0xC0) != 0x80; // count UTF-8 code points
    return n;
}

} // namespace

std::string format_bytes(std::size_t bytes) {
    const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    double v = double(bytes);
    while (v >= 1024.0 && u < 4) {
        v /= 1024.0;
        ++u;
    }
    if (u == 0) return std::to_string(bytes) + " B";
    const bool whole = std::fabs(v - std::round(v)) < 1e-9;
    return format_number(v, whole ? 0 : 2) + " " + units[u];
}

std::string grouped(std::uint64_t v) {
    const std::string s = std::to_string(v);
    std::string out;
    for (std::size_t i = 0; i < s.size(); ++i) {
        if (i && (s.size() - i) % 3 == 0) out += ',';
        out += s[i];
    }
    return out;
}

std::string format_number(double value, int precision) {
    if (std::isnan(value)) return "nan";
    if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.*f", precision < 0 ? 0 : precision, value);
    return buf;
}

text_table::text_table(std::vector<column> columns) : columns_(std::move(columns)) {
    require(!columns_.empty(), "a text table needs at least one column");
}

text_table::text_table(const std::vector<std::string>& headers) {
    require(!headers.empty(), "a text table needs at least one column");
    for (std::size_t c = 0; c < headers.size(); ++c) columns_.push_back({headers[c], "", c > 0});
}

void text_table::add_row(std::vector<std::string> cells) {
    require(cells.size() == columns_.size(), "text table row has " + std::to_string(cells.size()) +
                                                 " cells, expected " + std::to_string(columns_.size()));
    rows_.push_back(std::move(cells));
}

std::string text_table::render() const {
    const std::size_t n = columns_.size();
    std::vector<std::string> heads(n);
    std::vector<std::size_t> width(n);
    for (std::size_t c = 0; c < n; ++c) {
        heads[c] = columns_[c].header + (columns_[c].unit.empty() ? "" : " [" + columns_[c].unit + "]");
        width[c] = display_width(heads[c]);
        for (const auto& row : rows_) width[c] = std::max(width[c], display_width(row[c]));
    }
    auto cell = [&](const std::string& s, std::size_t c) {
        const std::string fill(width[c] - display_width(s), ' ');
        return columns_[c].numeric ? fill + s : s + fill;
    };
    auto line = [&](const std::vector<std::string>& cells) {
        std::string r;
        for (std::size_t c = 0; c < n; ++c) r += (c ? "  " : "") + cell(cells[c], c);
        while (!r.empty() && r.back() == ' ') r.pop_back();
        return r + "\n";
    };
    std::string out = line(heads);
    std::size_t total = 0;
    for (std::size_t c = 0; c < n; ++c) total += width[c] + (c ? 2 : 0);
    out += std::string(total, '-') + "\n";
    for (const auto& row : rows_) out += line(row);
    return out;
}

void text_table::print(std::FILE* f) const { std::fputs(render().c_str(), f); }

std::string text_table::csv() const {
    auto quote = [](std::string c) {
        if (!c.empty() && c.find_first_not_of("0123456789,") == std::string::npos) // a grouped integer
            c.erase(std::remove(c.begin(), c.end(), ','), c.end());
        if (c.find_first_of(",\"\n") == std::string::npos) return c;
        std::string q = "\"";
        for (char ch : c) q += ch == '"' ? std::string("\"\"") : std::string(1, ch);
        return q + "\"";
    };
    auto line = [&](const std::vector<std::string>& cells) {
        std::string r;
        for (std::size_t c = 0; c < cells.size(); ++c) r += (c ? "," : "") + quote(cells[c]);
        return r + "\n";
    };
    std::vector<std::string> heads;
    for (const auto& c : columns_) heads.push_back(c.header + (c.unit.empty() ? "" : " [" + c.unit + "]"));
    std::string out = line(heads);
    for (const auto& row : rows_) out += line(row);
    return out;
}

} // namespace attn
