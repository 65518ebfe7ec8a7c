// attn.results:table -- numbers as text, and a plain-text table that also renders as CSV.
module;
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <string>
#include <vector>
export module attn.results:table;

export namespace attn {

/// "1.50 GiB", "32 KiB", "512 B".
std::string format_bytes(std::size_t bytes);

/// A fixed-point number with `precision` digits after the point ("nan"/"inf" spelled out).
std::string format_number(double value, int precision = 2);

/// An integer with thousands separators: 1048576 -> "1,048,576".
std::string grouped(std::uint64_t v);

/// One column of a text_table: a header, the unit its values are in ("" for none), and
/// whether values are numbers (right-aligned) or text (left-aligned).
struct column {
    std::string header;
    std::string unit;
    bool numeric = true;
};

/// A plain-text table for terminals and logs: a header line with units in brackets, a rule,
/// then rows; numeric columns right-aligned. The same rows also render as CSV.
class text_table {
  public:
    explicit text_table(std::vector<column> columns);
    /// Plain headers: the first column text (left-aligned), the others numbers, no units.
    explicit text_table(const std::vector<std::string>& headers);
    text_table(std::initializer_list<std::string> headers) : text_table(std::vector<std::string>(headers)) {}
    /// Adds one row; throws attn::error when it does not have one cell per column.
    void add_row(std::vector<std::string> cells);
    std::string render() const;
    void print(std::FILE* f = stdout) const;
    /// The same table as CSV: headers (units in brackets), then rows; a cell is quoted when it
    /// holds a comma, quote or newline, and grouped integers ("1,048,576") are written plain.
    std::string csv() const;

  private:
    std::vector<column> columns_;
    std::vector<std::vector<std::string>> rows_;
};

} // namespace attn
