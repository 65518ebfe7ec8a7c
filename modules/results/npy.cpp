module;
#include <bit>
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <numeric>
#include <string>
#include <string_view>
#include <utility>
#include <vector>
#include "../detail/xtensor.hpp"
module attn.npy;
import attn.results;

namespace attn::npy {

std::string shape_string(const std::vector<std::size_t>& shape) {
    std::string s = "(";
    for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + (shape.size() == 1 ? ",)" : ")");
}

namespace {

static_assert(std::endian::native == std::endian::little, ".npy data are read as little-endian words");

/// What a .npy header says: the dtype string, the order, the shape, and where the data begin.
struct header {
    std::string descr;
    bool fortran = false;
    std::vector<std::size_t> shape;
    std::uintmax_t data_offset = 0;
};

/// A strict reader of the header's Python dict literal, e.g.
/// {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }: any key order, the three keys
/// exactly once, nothing else. Throws attn::error saying what is wrong and where.
class header_parser {
  public:
    explicit header_parser(std::string_view s) : s_(s) {}

    header parse() {
        header h;
        bool seen[3] = {false, false, false};
        expect('{');
        for (;;) {
            if (peek() == '}') break;
            const std::string key = quoted();
            expect(':');
            const int k = key == "descr" ? 0 : key == "fortran_order" ? 1 : key == "shape" ? 2 : -1;
            require(k >= 0, "unknown header key '" + key + "'");
            require(!seen[k], "header key '" + key + "' given twice");
            seen[k] = true;
            if (k == 0)
                h.descr = quoted();
            else if (k == 1)
                h.fortran = boolean();
            else
                h.shape = tuple();
            if (peek() != ',') break;
            ++i_;
        }
        expect('}');
        require(peek() == '\0', "text after the header's closing '}'");
        require(seen[0] && seen[1] && seen[2], "the header lacks one of 'descr', 'fortran_order', 'shape'");
        return h;
    }

  private:
    /// The next character that is not white space, or '\0' at the end.
    char peek() {
        while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n')) ++i_;
        return i_ < s_.size() ? s_[i_] : '\0';
    }
    void expect(char c) {
        require(peek() == c, std::string("expected '") + c + "' at header offset " + std::to_string(i_));
        ++i_;
    }
    std::string quoted() {
        const char q = peek();
        require(q == '\'' || q == '"', "expected a quoted string at header offset " + std::to_string(i_));
        const std::size_t end = s_.find(q, ++i_);
        require(end != std::string_view::npos, "unterminated string in the header");
        std::string out(s_.substr(i_, end - i_));
        i_ = end + 1;
        return out;
    }
    bool boolean() {
        peek();
        for (const auto& [word, value] :
             {std::pair{std::string_view("True"), true}, {std::string_view("False"), false}})
            if (s_.substr(i_, word.size()) == word) {
                i_ += word.size();
                return value;
            }
        throw error("fortran_order must be True or False (header offset " + std::to_string(i_) + ")");
    }
    std::vector<std::size_t> tuple() {
        std::vector<std::size_t> out;
        expect('(');
        while (peek() != ')') {
            require(std::isdigit(static_cast<unsigned char>(peek())), "a shape entry must be a non-negative integer "
                                                                      "(header offset " +
                                                                          std::to_string(i_) + ")");
            std::size_t v = 0;
            while (i_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_])))
                require(!__builtin_mul_overflow(v, std::size_t(10), &v) &&
                            !__builtin_add_overflow(v, std::size_t(s_[i_++] - '0'), &v),
                        "a shape entry does not fit in 64 bits");
            out.push_back(v);
            if (peek() != ',') break;
            ++i_;
        }
        expect(')');
        return out;
    }

    std::string_view s_;
    std::size_t i_ = 0;
};

/// Reads the magic string, the version, the header length (checked against the file's size
/// before the header is read) and the header; leaves `in` at the first data byte.
header read_header(std::istream& in, std::uintmax_t file_size) {
    unsigned char pre[12] = {};
    require(file_size >= 10 && bool(in.read(reinterpret_cast<char*>(pre), 10)), "shorter than a .npy preamble");
    require(std::memcmp(pre, "\x93NUMPY", 6) == 0, "no \\x93NUMPY magic string");
    const unsigned major = pre[6];
    require(major == 1 || major == 2 || major == 3, "unsupported .npy version " + std::to_string(major));
    std::uintmax_t len = pre[8] | std::uintmax_t(pre[9]) << 8, offset = 10;
    if (major >= 2) {
        require(file_size >= 12 && bool(in.read(reinterpret_cast<char*>(pre) + 10, 2)), "shorter than a .npy preamble");
        len |= std::uintmax_t(pre[10]) << 16 | std::uintmax_t(pre[11]) << 24;
        offset = 12;
    }
    require(len <= file_size - offset, "the header length " + std::to_string(len) + " runs past the end of the file (" +
                                           std::to_string(file_size) + " bytes)");
    std::string text(std::size_t(len), '\0');
    require(bool(in.read(text.data(), std::streamsize(len))), "the header is cut short");
    require(!text.empty() && text.back() == '\n', "the header does not end in a newline");
    header h = header_parser(text).parse();
    h.data_offset = offset + len;
    return h;
}

/// The file's words as doubles in row-major order (a Fortran-ordered file is transposed).
template <class T>
std::vector<double> to_row_major(const std::vector<char>& raw, const std::vector<std::size_t>& shape, bool fortran) {
    const std::size_t n = raw.size() / sizeof(T);
    std::vector<double> out(n);
    auto word = [&](std::size_t k) {
        T v;
        std::memcpy(&v, raw.data() + k * sizeof(T), sizeof(T));
        return double(v);
    };
    if (!fortran || shape.size() < 2) {
        for (std::size_t k = 0; k < n; ++k) out[k] = word(k);
        return out;
    }
    // column-major strides; walk the row-major index like an odometer (last axis fastest)
    std::vector<std::size_t> stride(shape.size()), index(shape.size(), 0);
    for (std::size_t a = 0, s = 1; a < shape.size(); s *= shape[a], ++a) stride[a] = s;
    std::size_t offset = 0;
    for (std::size_t k = 0; k < n; ++k) {
        out[k] = word(offset);
        for (std::size_t a = shape.size(); a-- > 0;) {
            offset += stride[a];
            if (++index[a] < shape[a]) break;
            offset -= stride[a] * shape[a];
            index[a] = 0;
        }
    }
    return out;
}

template <class T>
void save_impl(const std::string& path, const std::vector<std::size_t>& shape, const T* data) {
    const std::size_t n = std::accumulate(shape.begin(), shape.end(), std::size_t(1), std::multiplies<>());
    const auto view = xt::adapt(data, n, xt::no_ownership(), shape);
    write_atomic(path, xt::dump_npy(view)); // the one atomic writer, with its output-path rule
}

} // namespace

array load(const std::string& path) {
    std::error_code ec;
    const auto file_size = std::filesystem::file_size(path, ec);
    require(!ec, path + ": cannot read (" + ec.message() + ")");
    std::ifstream in(path, std::ios::binary);
    require(bool(in), path + ": cannot open");

    // The header is read and checked before anything is allocated from it: its length against
    // the file's size, then every shape product in overflow-checked arithmetic, then the data
    // it describes against what the file holds.
    header h;
    try {
        h = read_header(in, file_size);
    } catch (const error& e) {
        throw error(path + ": not a valid .npy file (" + e.what() + ")");
    }
    require(h.descr == "<f2" || h.descr == "<f4" || h.descr == "<f8",
            path + ": dtype '" + h.descr + "' is not float16 ('<f2'), float32 ('<f4') or float64 ('<f8')");
    const std::size_t word = h.descr == "<f2" ? 2 : h.descr == "<f4" ? 4 : 8;
    std::size_t n = 1, bytes = 0;
    for (std::size_t d : h.shape)
        require(!__builtin_mul_overflow(n, d, &n),
                path + ": shape " + shape_string(h.shape) + " has more elements than 2^64");
    require(!__builtin_mul_overflow(n, word, &bytes),
            path + ": shape " + shape_string(h.shape) + " needs more than 2^64 bytes of data");
    require(file_size - h.data_offset >= bytes, path + ": truncated: shape " + shape_string(h.shape) + " needs " +
                                                    std::to_string(bytes) + " bytes of data, the file has " +
                                                    std::to_string(file_size - h.data_offset));

    std::vector<char> raw(bytes);
    in.read(raw.data(), std::streamsize(bytes));
    require(bool(in), path + ": read failed");
    array a;
    a.shape = h.shape;
    a.type = word == 2 ? dtype::f16 : word == 4 ? dtype::f32 : dtype::f64;
    a.values = word == 2   ? to_row_major<f16>(raw, h.shape, h.fortran)
               : word == 4 ? to_row_major<float>(raw, h.shape, h.fortran)
                           : to_row_major<double>(raw, h.shape, h.fortran);
    return a;
}

std::vector<double> load_shaped(const std::string& path, const std::vector<std::size_t>& expected,
                                const std::string& meaning) {
    array a = load(path);
    require(a.shape == expected,
            path + ": shape " + shape_string(a.shape) + ", expected " + shape_string(expected) + " = " + meaning);
    require_finite(a.values, path); // weights are refused like inputs: NaN or Inf would poison every output
    return std::move(a.values);
}

void save(const std::string& path, const std::vector<std::size_t>& shape, const float* data) {
    save_impl(path, shape, data);
}
void save(const std::string& path, const std::vector<std::size_t>& shape, const double* data) {
    save_impl(path, shape, data);
}

} // namespace attn::npy
