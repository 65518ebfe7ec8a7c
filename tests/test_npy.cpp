// .npy round trips and every bad-file error, written with the code's own writer where the
// content is known, and by hand (raw bytes) where it must be malformed.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>
#include <catch2/catch.hpp>
import attn.families;
import attn.core;
import attn.npy;

namespace fs = std::filesystem;

namespace {

fs::path scratch(const std::string& name) {
    const fs::path dir = fs::temp_directory_path() / "attnbench-tests";
    fs::create_directories(dir);
    return dir / name;
}

std::string load_error(const std::string& path) {
    try {
        attn::npy::load(path);
    } catch (const attn::error& e) {
        return e.what();
    }
    return "";
}

// A version 1.0 .npy header for `descr` and `shape_text`, padded as NumPy does.
void write_raw(const fs::path& path, const std::string& descr, const std::string& shape_text,
               const std::string& payload, bool fortran = false) {
    std::string header = "{'descr': '" + descr + "', 'fortran_order': " + (fortran ? "True" : "False") +
                         ", 'shape': " + shape_text + ", }";
    while ((10 + header.size() + 1) % 64) header += ' ';
    header += '\n';
    std::ofstream out(path, std::ios::binary);
    out.write("\x93NUMPY\x01\x00", 8);
    const unsigned short len = (unsigned short)header.size();
    out.put(char(len & 0xff));
    out.put(char(len >> 8));
    out << header << payload;
}

} // namespace

TEST_CASE(".npy round trip in float32 and float64", "[npy]") {
    const std::vector<float> f{1.5f, -2.0f, 3.25f, 0.0f, 1e-30f, 7.0f};
    const std::vector<double> d{1.0 / 3.0, -2.0, 1e300, 0.0, 5e-324, 7.0};
    attn::npy::save(scratch("f.npy").string(), {2, 3}, f.data());
    attn::npy::save(scratch("d.npy").string(), {3, 1, 2}, d.data());
    const auto a = attn::npy::load(scratch("f.npy").string());
    const auto b = attn::npy::load(scratch("d.npy").string());
    CHECK(a.type == attn::npy::dtype::f32);
    CHECK(a.shape == std::vector<std::size_t>{2, 3});
    CHECK(a.values == std::vector<double>(f.begin(), f.end()));
    CHECK(b.type == attn::npy::dtype::f64);
    CHECK(b.shape == std::vector<std::size_t>{3, 1, 2});
    CHECK(b.values == d);
}

TEST_CASE("a float16 .npy is read and widened exactly", "[npy]") {
    // binary16 words, decoded by hand: sign | 5-bit exponent (bias 15) | 10-bit fraction
    const unsigned short words[] = {0x3C00,  // 1.0
                                    0xC000,  // -2.0
                                    0x3555,  // 2^-2 * (1 + 0x155/1024) = 0.333251953125
                                    0x0001,  // the smallest subnormal, 2^-24
                                    0x7BFF}; // the largest finite, 65504
    write_raw(scratch("h.npy"), "<f2", "(5,)", std::string(reinterpret_cast<const char*>(words), sizeof words));
    const auto a = attn::npy::load(scratch("h.npy").string());
    CHECK(a.type == attn::npy::dtype::f16);
    CHECK(a.values == std::vector<double>{1.0, -2.0, 0.333251953125, 0x1.0p-24, 65504.0});
}

TEST_CASE("a Fortran-ordered file is read in row-major order", "[npy]") {
    // the 2x3 matrix [[1,2,3],[4,5,6]] stored column by column
    const std::vector<double> col_major{1, 4, 2, 5, 3, 6};
    write_raw(scratch("fortran.npy"), "<f8", "(2, 3)", std::string(reinterpret_cast<const char*>(col_major.data()), 48),
              true);
    const auto a = attn::npy::load(scratch("fortran.npy").string());
    CHECK(a.values == std::vector<double>{1, 2, 3, 4, 5, 6});
}

TEST_CASE("bad .npy files are one-line errors naming the file", "[npy][errors]") {
    const std::string missing = scratch("missing.npy").string();
    CHECK(load_error(missing) == missing + ": cannot read (No such file or directory)");

    const auto garbage = scratch("garbage.npy");
    std::ofstream(garbage) << "this is not numpy at all";
    CHECK(load_error(garbage.string()).rfind(garbage.string() + ": not a valid .npy file", 0) == 0);

    const auto ints = scratch("int.npy");
    write_raw(ints, "<i8", "(2,)", std::string(16, '\0'));
    CHECK(load_error(ints.string()) ==
          ints.string() + ": dtype '<i8' is not float16 ('<f2'), float32 ('<f4') or float64 ('<f8')");

    const auto truncated = scratch("truncated.npy");
    write_raw(truncated, "<f4", "(4, 4)", std::string(20, '\0'));
    CHECK(load_error(truncated.string()) ==
          truncated.string() + ": truncated: shape (4, 4) needs 64 bytes of data, the file has 20");

    const auto huge = scratch("huge.npy"); // a corrupt header must not make us allocate petabytes
    write_raw(huge, "<f8", "(100000000000, 100000)", std::string(8, '\0'));
    CHECK(load_error(huge.string()).find(": truncated: shape (100000000000, 100000)") != std::string::npos);

    const auto wraps = scratch("wraps.npy"); // 2^32 * 2^32 * 2 elements wrap to 0 in 64 bits
    write_raw(wraps, "<f8", "(4294967296, 4294967296, 2)", std::string(16, '\0'));
    CHECK(load_error(wraps.string()) ==
          wraps.string() + ": shape (4294967296, 4294967296, 2) has more elements than 2^64");

    const auto v2 = scratch("v2_length.npy"); // a version 2.0 header length of 4 GB in a 70-byte file
    std::ofstream(v2, std::ios::binary) << std::string("\x93NUMPY\x02\x00\xff\xff\xff\xff", 12)
                                        << "{'descr': '<f8', 'fortran_order': False, 'shape': (1,), }\n";
    CHECK(load_error(v2.string()).find("the header length 4294967295 runs past the end of the file") !=
          std::string::npos);

    const auto keys = scratch("keys.npy"); // the header is a dict of exactly the three keys
    write_raw(keys, "<f8", "(1,), 'extra': 1", std::string(8, '\0'));
    CHECK(load_error(keys.string()).find("unknown header key 'extra'") != std::string::npos);
}

TEST_CASE("state_dict directories: round trip, packed in_proj, shape errors", "[npy][weights]") {
    attn::problem p = attn::gqa(8, 4, 2, 3);
    p.bias = true;
    const auto w = attn::random_weights<double>(p, 5);
    const std::string dir = scratch("sd_gqa").string();
    fs::remove_all(dir);
    attn::family_ops_of(p).save(dir, p, w);
    attn::problem q = attn::gqa(8, 4, 2, 3);
    const auto r = attn::family_ops_of(q).load(dir, q);
    CHECK(q.bias);
    CHECK(q.qk_dim() == 2);
    CHECK(r[attn::qkv::wq] == w[attn::qkv::wq]);
    CHECK(r[attn::qkv::wk] == w[attn::qkv::wk]);
    CHECK(r[attn::qkv::bv] == w[attn::qkv::bv]);
    CHECK(r[attn::qkv::bo] == w[attn::qkv::bo]);

    // PyTorch's packed layout: in_proj_weight = [W_q; W_k; W_v]
    attn::problem m = attn::mha(8, 2, 3);
    const auto wm = attn::random_weights<double>(m, 6);
    const std::string packed = scratch("sd_packed").string();
    fs::remove_all(packed);
    fs::create_directories(packed);
    std::vector<double> in_proj(wm[attn::qkv::wq]);
    in_proj.insert(in_proj.end(), wm[attn::qkv::wk].begin(), wm[attn::qkv::wk].end());
    in_proj.insert(in_proj.end(), wm[attn::qkv::wv].begin(), wm[attn::qkv::wv].end());
    attn::npy::save(packed + "/in_proj_weight.npy", {24, 8}, in_proj.data());
    attn::npy::save(packed + "/out_proj.weight.npy", {8, 8}, wm[attn::qkv::wo].data());
    attn::problem m2 = attn::mha(8, 2, 3);
    const auto rm = attn::family_ops_of(m2).load(packed, m2);
    CHECK(rm[attn::qkv::wk] == wm[attn::qkv::wk]);
    CHECK(!m2.bias);

    // the GQA directory read as MHA: k_proj has G*d_head = 4 rows, MHA expects 8
    attn::problem wrong = attn::mha(8, 4, 3);
    try {
        attn::family_ops_of(wrong).load(dir, wrong);
        FAIL("expected an error");
    } catch (const attn::error& e) {
        CHECK(std::string(e.what()) ==
              dir + "/k_proj_weight.npy: shape (4, 8), expected (8, 8) = [G*d_head, d_model] with G=4");
    }
    fs::remove(dir + "/out_proj.bias.npy");
    try {
        attn::family_ops_of(q).load(dir, q);
        FAIL("expected an error");
    } catch (const attn::error& e) {
        CHECK(std::string(e.what()) ==
              dir + ": in_proj_bias.npy and out_proj.bias.npy must both be present or both absent");
    }
}
