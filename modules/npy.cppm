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

/// Layer weights read from a directory of .npy files named as PyTorch's
/// nn.MultiheadAttention state_dict: in_proj_weight [3*d_model, d_model] (MHA) or
/// q_proj_weight [H*d_head, d_model], k_proj_weight and v_proj_weight [G*d_head, d_model];
/// in_proj_bias [H*d_head + 2*G*d_head]; out_proj.weight [d_model, H*d_head]; out_proj.bias [d_model].
/// Fills p.d_head and p.bias from what the files hold; p.d_model, p.heads, p.kv_heads must be set.
weights<double> load_state_dict(const std::string& dir, problem& p);

/// Writes weights under the same names (separate q/k/v projections, so every family fits).
void save_state_dict(const std::string& dir, const problem& p, const weights<double>& w);

/// "(2, 3, 4)"
std::string shape_string(const std::vector<std::size_t>& shape);

} // namespace attn::npy
