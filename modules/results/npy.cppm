// attn.npy -- NumPy .npy files in and out (through xtensor's xnpy), so any tool that speaks
// NumPy can feed attnbench and check its answers. Every failure is one attn::error line
// naming the file.
module;
#include <cstddef>
#include <string>
#include <vector>
export module attn.npy;
export import attn.core;

export namespace attn::npy {

enum class dtype { f16, f32, f64 };

/// A loaded array, row-major, widened to double (the file's dtype is kept in `type`).
struct array {
    dtype type = dtype::f64;
    std::vector<std::size_t> shape;
    std::vector<double> values;
};

/// Reads a little-endian float16, float32 or float64 .npy (C or Fortran order); every value is
/// widened to double exactly.
array load(const std::string& path);

/// Writes atomically (a temporary file renamed into place), row-major.
void save(const std::string& path, const std::vector<std::size_t>& shape, const float* data);
void save(const std::string& path, const std::vector<std::size_t>& shape, const double* data);

/// The array at `path` as doubles, refused in one line naming the file unless its shape is
/// `expected` (`meaning` says what that shape is, e.g. "[d_model, H*d_head]") and every value is finite.
std::vector<double> load_shaped(const std::string& path, const std::vector<std::size_t>& expected,
                                const std::string& meaning);

/// "(2, 3, 4)"
std::string shape_string(const std::vector<std::size_t>& shape);

} // namespace attn::npy
