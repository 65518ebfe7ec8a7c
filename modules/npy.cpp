module;
#include <cstddef>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <numeric>
#include <string>
#include <vector>
#include "detail/xtensor.hpp"
module attn.npy;

namespace attn::npy {

std::string shape_string(const std::vector<std::size_t>& shape) {
    std::string s = "(";
    for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + (shape.size() == 1 ? ",)" : ")");
}

namespace {

template <class T>
std::vector<double> to_row_major(xt::detail::npy_file&& file) {
    auto a = std::move(file).cast<T>(); // keeps the file's layout
    xt::xarray<double, xt::layout_type::row_major> r = xt::cast<double>(a);
    return {r.begin(), r.end()};
}

template <class T>
void save_impl(const std::string& path, const std::vector<std::size_t>& shape, const T* data) {
    const std::size_t n = std::accumulate(shape.begin(), shape.end(), std::size_t(1), std::multiplies<>());
    const auto view = xt::adapt(data, n, xt::no_ownership(), shape);
    const std::string tmp = path + ".tmp";
    try {
        xt::dump_npy(tmp, view);
    } catch (const std::exception& e) {
        throw error(path + ": cannot write (" + e.what() + ")");
    }
    std::error_code ec;
    std::filesystem::rename(tmp, path, ec);
    require(!ec, path + ": cannot write (" + ec.message() + ")");
}

} // namespace

array load(const std::string& path) {
    std::error_code ec;
    const auto file_size = std::filesystem::file_size(path, ec);
    require(!ec, path + ": cannot read (" + ec.message() + ")");
    std::ifstream in(path, std::ios::binary);
    require(bool(in), path + ": cannot open");

    // Parse the header first, so a bad or truncated file is an error and never an allocation
    // of whatever size a corrupt header claims.
    std::string descr;
    bool fortran = false;
    std::vector<std::size_t> shape;
    try {
        unsigned char major = 0, minor = 0;
        xt::detail::read_magic(in, &major, &minor);
        require(major == 1 || major == 2, "unsupported .npy version " + std::to_string(major));
        const std::string header = major == 1 ? xt::detail::read_header_1_0(in) : xt::detail::read_header_2_0(in);
        require(bool(in), "header is cut short");
        xt::detail::parse_header(header, descr, &fortran, shape);
    } catch (const std::exception& e) {
        throw error(path + ": not a valid .npy file (" + e.what() + ")");
    }
    require(descr == "<f4" || descr == "<f8",
            path + ": dtype '" + descr + "' is not float32 ('<f4') or float64 ('<f8')");
    const std::size_t word = descr == "<f4" ? 4 : 8;
    const std::size_t n = std::accumulate(shape.begin(), shape.end(), std::size_t(1), std::multiplies<>());
    const std::size_t header_end = std::size_t(in.tellg());
    require(file_size >= header_end && file_size - header_end >= n * word,
            path + ": truncated: shape " + shape_string(shape) + " needs " + std::to_string(n * word) +
                " bytes of data, the file has " +
                std::to_string(file_size - std::min<std::size_t>(file_size, header_end)));

    in.seekg(0);
    auto file = xt::detail::load_npy_file(in);
    require(bool(in), path + ": read failed");
    array a;
    a.shape = shape;
    a.type = word == 4 ? dtype::f32 : dtype::f64;
    a.values = word == 4 ? to_row_major<float>(std::move(file)) : to_row_major<double>(std::move(file));
    return a;
}

namespace {

std::vector<double> load_shaped(const std::string& path, const std::vector<std::size_t>& expected,
                                const std::string& meaning) {
    array a = load(path);
    require(a.shape == expected,
            path + ": shape " + shape_string(a.shape) + ", expected " + shape_string(expected) + " = " + meaning);
    return std::move(a.values);
}

bool exists(const std::string& path) { return std::filesystem::exists(path); }

} // namespace

weights<double> load_state_dict(const std::string& dir, problem& p) {
    require(std::filesystem::is_directory(dir), dir + ": not a directory");
    const std::string f = dir + "/";
    const std::size_t d = p.d_model, h = p.heads, g = p.kv_heads;
    weights<double> w;
    if (exists(f + "in_proj_weight.npy")) {
        require(h == g, f + "in_proj_weight.npy: a packed projection means MHA, but kv_heads=" + std::to_string(g) +
                            " != heads=" + std::to_string(h) + " (use q/k/v_proj_weight.npy)");
        p.d_head = d / h;
        require(d % h == 0, "d_model=" + std::to_string(d) + " is not divisible by heads=" + std::to_string(h));
        auto packed = load_shaped(f + "in_proj_weight.npy", {3 * d, d}, "[3*d_model, d_model]");
        w.wq.assign(packed.begin(), packed.begin() + d * d);
        w.wk.assign(packed.begin() + d * d, packed.begin() + 2 * d * d);
        w.wv.assign(packed.begin() + 2 * d * d, packed.end());
    } else {
        const std::string qf = f + "q_proj_weight.npy";
        require(exists(qf), dir + ": neither in_proj_weight.npy nor q_proj_weight.npy is there");
        array q = load(qf);
        require(q.shape.size() == 2 && q.shape[1] == d && q.shape[0] % h == 0 && q.shape[0] > 0,
                qf + ": shape " + shape_string(q.shape) + ", expected (H*d_head, " + std::to_string(d) +
                    ") with H=" + std::to_string(h));
        p.d_head = q.shape[0] / h;
        w.wq = std::move(q.values);
        const std::string kv_meaning = "[G*d_head, d_model] with G=" + std::to_string(g);
        w.wk = load_shaped(f + "k_proj_weight.npy", {g * p.d_head, d}, kv_meaning);
        w.wv = load_shaped(f + "v_proj_weight.npy", {g * p.d_head, d}, kv_meaning);
    }
    const std::size_t qw = p.q_width(), kw = p.kv_width();
    w.wo = load_shaped(f + "out_proj.weight.npy", {d, qw}, "[d_model, H*d_head]");
    const bool in_bias = exists(f + "in_proj_bias.npy"), out_bias = exists(f + "out_proj.bias.npy");
    require(in_bias == out_bias, dir + ": in_proj_bias.npy and out_proj.bias.npy must both be present or both absent");
    p.bias = in_bias;
    if (p.bias) {
        auto b = load_shaped(f + "in_proj_bias.npy", {qw + 2 * kw}, "[H*d_head + 2*G*d_head]");
        w.bq.assign(b.begin(), b.begin() + qw);
        w.bk.assign(b.begin() + qw, b.begin() + qw + kw);
        w.bv.assign(b.begin() + qw + kw, b.end());
        w.bo = load_shaped(f + "out_proj.bias.npy", {d}, "[d_model]");
    }
    return w;
}

void save_state_dict(const std::string& dir, const problem& p, const weights<double>& w) {
    std::filesystem::create_directories(dir);
    const std::string f = dir + "/";
    save(f + "q_proj_weight.npy", {p.q_width(), p.d_model}, w.wq.data());
    save(f + "k_proj_weight.npy", {p.kv_width(), p.d_model}, w.wk.data());
    save(f + "v_proj_weight.npy", {p.kv_width(), p.d_model}, w.wv.data());
    save(f + "out_proj.weight.npy", {p.d_model, p.q_width()}, w.wo.data());
    if (p.bias) {
        std::vector<double> b(w.bq);
        b.insert(b.end(), w.bk.begin(), w.bk.end());
        b.insert(b.end(), w.bv.begin(), w.bv.end());
        save(f + "in_proj_bias.npy", {b.size()}, b.data());
        save(f + "out_proj.bias.npy", {p.d_model}, w.bo.data());
    }
}

void save(const std::string& path, const std::vector<std::size_t>& shape, const float* data) {
    save_impl(path, shape, data);
}
void save(const std::string& path, const std::vector<std::size_t>& shape, const double* data) {
    save_impl(path, shape, data);
}

} // namespace attn::npy
