// attn::cuda -- the CUDA backend's whole interface, in plain C++17: no CUDA header, no module, so
// the C++20-modules tree (clang) and the CUDA sources (nvcc) both include it. Every case copies its
// inputs to the device once, in its storage type, and then runs, reads back or times one kernel.
// Without a usable GPU, or in a build without CUDA, query() says why in one line, refusal() still
// answers, and constructing a case throws attn::cuda::error.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "dtype.hpp" // attn::types::dtype: the one list of storage types (modules/core/dtype.hpp)

namespace attn::cuda {

/// How tensors are stored on the device: the suite's one storage type (f64 is refused: the GPU
/// kernels store f32, bf16, f16, and int8 caches). bf16 and f16: inputs rounded once on the host
/// (to nearest, ties to even), all products, the softmax and the accumulation in fp32, outputs
/// rounded to the format and widened back when copied to the host. int8 is a decode cache type only.
using storage = attn::types::dtype;

/// The attention kernels: naive (scores in global memory), tiled (shared-memory tiles, online
/// softmax, fp32), flash (tensor cores through mma.sync, bf16/f16), decode (split-key
/// flash-decoding over a cache), hopper (sm_90a: wgmma fed by TMA, warp-specialised warpgroups).
enum class kernel { naive, tiled, flash, decode, hopper };

/// "cuda-naive", "cuda-tiled", "cuda-flash", "cuda-decode", "cuda-hopper".
const char* name(kernel k);
/// "f32", "bf16", "f16", "int8" (the traits' name).
const char* name(storage s);

/// One attention core: H query heads over G key/value heads (H % G == 0; query head h reads kv head
/// floor(h*G/H)); causal is bottom-right aligned (query i of n_q sees keys j <= i + n_kv - n_q, and a
/// row that sees no key yields zeros). d_v = 0 means d_v = d_qk; scale = 0 means 1/sqrt(d_qk).
struct shape {
    std::size_t batch = 1, heads = 1, kv_heads = 1, n_q = 1, n_kv = 1, d_qk = 0, d_v = 0;
    bool causal = false;
    /// Sliding window W (causal only): query i sees keys i + n_kv - n_q - W + 1 ... i + n_kv - n_q
    /// (the CPU suite's convention); 0: none. Served by every kernel (cuda-decode also over a
    /// rolling buffer: decode_spec::ring).
    std::size_t window = 0;
    double scale = 0;
};

/// The shape with its defaults filled in: d_v = d_qk when 0, scale = 1/sqrt(d_qk) when 0.
shape resolved(shape s);

/// What the device is, or one line saying why there is none.
struct device_info {
    bool present = false;
    std::string reason; ///< when !present: one line ("no CUDA device: cudaGetDeviceCount: ...")
    std::string name;
    int sms = 0, cc_major = 0, cc_minor = 0;
    std::size_t l2_bytes = 0, global_bytes = 0, free_bytes = 0;
    int driver_version = 0, runtime_version = 0;
    int clock_khz = 0, memory_clock_khz = 0, memory_bus_bits = 0; ///< the device's peak clocks (attributes)
};

/// Device 0's properties; never throws.
device_info query();

/// Whether this library was compiled with the CUDA kernels (false: the absent.cpp stubs).
bool built_with_cuda();

/// "" when the kernel serves the case, else one line naming what it lacks ("cuda-flash serves d_head
/// 64 and 128, not 80"). Pure host logic: the same answer with or without a GPU or CUDA.
std::string refusal(kernel k, const shape& s, storage st);

/// Run-time choices of the tensor-core prefill kernels, so that one process can time candidates
/// (0 everywhere: each kernel's default). The other kernels ignore them.
struct core_options {
    int tile = 0; ///< cuda-flash, cuda-hopper: candidate tile_candidates(k, s)[tile - 1]; 0: the default (the first)
    int ctas = 0; ///< cuda-hopper: persistent blocks in the grid; 0: one per SM
};

/// The tile candidates of cuda-flash or cuda-hopper for the shape's head widths ("q128 kv64 w4",
/// "q128 kv128 s2", ...): core_options::tile = i + 1 picks entry i. Empty for the other kernels
/// and for widths the kernel does not serve. Pure host logic.
std::vector<std::string> tile_candidates(kernel k, const shape& s);

/// A failed CUDA call or a refused case: one line naming the failed call and what it was for.
class error : public std::runtime_error {
  public:
    using std::runtime_error::runtime_error;
};

/// A device allocation that failed: one line naming the bytes and what they were for.
class out_of_memory : public error {
  public:
    using error::error;
};

/// One attention core on the device. Inputs (host fp32, row-major, "interleaved heads"):
/// q [B, n_q, H*d_qk], k [B, n_kv, G*d_qk], v [B, n_kv, G*d_v]; copied (rounded to the storage
/// type) to device buffers once by the constructor. output() is [B, n_q, H*d_v].
class core_case {
  public:
    /// Throws error (refusal(k, s, st) not empty, or a CUDA call failed) or out_of_memory.
    core_case(kernel k, const shape& s, storage st, const float* q, const float* k_in, const float* v);
    /// The same with run-time options; also throws error for a tile the kernel does not have.
    core_case(kernel k, const shape& s, storage st, const float* q, const float* k_in, const float* v,
              const core_options& options);
    ~core_case();
    core_case(const core_case&) = delete;
    core_case& operator=(const core_case&) = delete;
    core_case(core_case&&) noexcept;
    core_case& operator=(core_case&&) noexcept;

    /// One call, synchronised; the output is poisoned (NaN) first, so an unwritten element fails.
    void run();
    /// The last run's output, [B, n_q, H*d_v], widened to fp32.
    std::vector<float> output();
    /// Device time of each of `repetitions` calls (CUDA events around each call), after `warmup`
    /// untimed calls; with flush_l2, the L2 is left clean before each call, outside the events (a
    /// buffer of twice the L2 written, then read).
    std::vector<double> time_ms(int repetitions, int warmup, bool flush_l2);

    struct impl;

  private:
    std::unique_ptr<impl> impl_;
};

/// cuda-decode's run-time choices (0, or -1 for the path: the plan's own), so that one process
/// can time candidates over one uploaded cache (decode_case::set_options).
struct decode_options {
    int splits = 0;          ///< chunks of keys per (sequence, kv head, row group), 1-128
    int stages = 0;          ///< cp.async pipeline depth, 2-8 tiles
    int heads_per_block = 0; ///< query heads of one kv head per block (rows = heads x n_q, capped)
    int tensor_cores = -1;   ///< -1 planned; 0 CUDA cores (every cache type); 1 mma.sync (bf16, f16, int8)
};

/// A decode step's cache beyond the shape. Element types as decode_case says; d_k = d_qk, d_v.
///  - Contiguous (page_size 0): K [B, G, capacity, d_k], V [B, G, capacity, d_v]; int8 scales
///    [B, G, capacity]; key position t of (b, g) in row slot(t).
///  - Paged (page_size a power of two, 16 and 64 tested): K [pages, page_size, G, d_k],
///    V [pages, page_size, G, d_v], int8 scales [pages, page_size, G]; block_table [B, max_pages]
///    (int32) names the page of slots [i page_size, (i + 1) page_size) of sequence b.
///  - lengths [B] (int32; null: n_kv each): keys sequence b holds, n_q <= lengths[b] <= n_kv
///    (shape.n_kv is the longest); its last n_q keys are the step's new tokens.
///  - ring > 0 (a rolling buffer, needs shape.window): key position t lives in slot t mod ring,
///    ring >= window + n_q - 1 (Mistral's W slots at n_q = 1); 0: slot t = t.
///  - v_from_k (MLA's absorbed form: one latent head, d_k = d_c + d_rope, d_v = d_c): V is the
///    first d_v columns of K's rows (v_cache and v_scales unused; int8 values share the row's scale).
struct decode_spec {
    std::size_t capacity = 0;                  ///< contiguous: rows per (sequence, kv head); 0 means n_kv
    std::size_t page_size = 0;                 ///< 0: contiguous
    std::size_t pages = 0;                     ///< paged: pages in the pool
    std::size_t max_pages = 0;                 ///< paged: block-table row length
    const std::int32_t* block_table = nullptr; ///< paged: [B, max_pages]
    const std::int32_t* lengths = nullptr;     ///< [B] or null
    std::size_t ring = 0;                      ///< rolling-buffer slots; 0: none
    bool v_from_k = false;                     ///< MLA absorbed: V = K's first d_v columns
    decode_options options;
};

/// What cuda-decode's plan chose for a case.
struct decode_plan_info {
    std::string kernel; ///< "mma bf16 d 128/128 m-tiles 1" or "cuda-cores f32 lanes 16"
    bool tensor_cores = false;
    int splits = 1, stages = 2, heads_per_block = 1, rows_per_block = 1, groups = 1;
    int tile = 0, threads = 0, blocks_per_sm = 0;
    std::size_t smem = 0;
};

/// "" when cuda-decode serves (s, st, spec), else one line naming what it lacks. Pure host logic.
/// Served: n_q 1-8 (bottom-right causal among them when s.causal), n_kv >= n_q, a window (with
/// causal) over a plain or rolling cache, H/G heads per kv head (MHA, GQA, MQA), d_k = d_v a
/// multiple of 8 up to 256 (mma.sync for 64 and 128 in bf16, f16, int8; CUDA cores otherwise and
/// for f32), MLA absorbed (v_from_k, d_k/d_v 576/512 or 160/128, bf16, f16, int8), contiguous or paged.
std::string decode_refusal(const shape& s, storage st, const decode_spec& spec);

/// One decode step with cuda-decode: n_q new tokens per sequence (their keys and values already
/// the last n_q of the cache) against the cache. q [B, n_q, H*d_qk] fp32; caches in the storage
/// type (f32 as float, bf16/f16 as uint16_t bit patterns, int8 as int8_t with fp32 scales, value =
/// q * scale). output() is [B, n_q, H*d_v].
class decode_case {
  public:
    /// The original form: contiguous caches [B, G, capacity, d], d = d_qk = d_v, n_kv <= capacity.
    decode_case(const shape& s, storage cache_type, const float* q, const void* k_cache, const void* v_cache,
                const float* k_scales, const float* v_scales, std::size_t capacity);
    /// Any layout decode_spec describes (throws error with decode_refusal's line when refused, or
    /// when the block table names a page outside the pool).
    decode_case(const shape& s, storage cache_type, const float* q, const void* k_cache, const void* v_cache,
                const float* k_scales, const float* v_scales, const decode_spec& spec);
    ~decode_case();
    decode_case(const decode_case&) = delete;
    decode_case& operator=(const decode_case&) = delete;
    decode_case(decode_case&&) noexcept;
    decode_case& operator=(decode_case&&) noexcept;

    void run();
    std::vector<float> output();
    std::vector<double> time_ms(int repetitions, int warmup, bool flush_l2);
    /// How the keys were split: chunks per (batch, kv head, row group).
    std::size_t chunks() const;
    /// Re-plans with new options (the cache stays on the device); throws error for values out of range.
    void set_options(const decode_options& o);
    /// What the plan chose.
    decode_plan_info plan() const;

    struct impl;

  private:
    std::unique_ptr<impl> impl_;
};

/// The host arrays of one layer, fp32, row-major; weights as PyTorch Linear [out, in]:
/// x_q [B, n_q, d_model], x_kv [B, n_kv, d_model], wq [H*d_qk, d_model], wk [G*d_qk, d_model],
/// wv [G*d_v, d_model], wo [d_model, H*d_v]; biases [out] or null.
struct layer_inputs {
    const float* x_q = nullptr;
    const float* x_kv = nullptr;
    const float* wq = nullptr;
    const float* wk = nullptr;
    const float* wv = nullptr;
    const float* wo = nullptr;
    const float* bq = nullptr;
    const float* bk = nullptr;
    const float* bv = nullptr;
    const float* bo = nullptr;
};

/// y = attention(x_q Wq^T + bq, x_kv Wk^T + bk, x_kv Wv^T + bv) Wo^T + bo: projections through cuBLAS
/// (fp32 accumulation; each projection's result rounded once to the storage type), the core through
/// the given kernel (naive, tiled or flash). output() is y [B, n_q, d_model].
class layer_case {
  public:
    layer_case(const shape& s, std::size_t d_model, storage st, kernel k, const layer_inputs& in);
    ~layer_case();
    layer_case(const layer_case&) = delete;
    layer_case& operator=(const layer_case&) = delete;
    layer_case(layer_case&&) noexcept;
    layer_case& operator=(layer_case&&) noexcept;

    void run();
    std::vector<float> output();
    std::vector<double> time_ms(int repetitions, int warmup, bool flush_l2);

    struct impl;

  private:
    std::unique_ptr<impl> impl_;
};

/// A read kernel's shape and its median bandwidth (GB/s).
struct read_candidate {
    std::string shape;
    double gbs = 0;
};

/// The device's measured ceilings (medians over the repetitions).
struct peak {
    double tensor_tflops = 0; ///< cuBLAS bf16 GEMM, gemm_n^3, fp32 accumulation: 2 n^3 FLOP per call
    double f16_tflops = 0;    ///< the same in f16
    double read_gbs = 0;      ///< the best read-only kernel over read_bytes (>= 32 x L2): bytes read / time
    double copy_gbs = 0;      ///< cudaMemcpy device to device of read_bytes: bytes read + written / time
    std::size_t gemm_n = 0, read_bytes = 0;
    std::string read_kernel; ///< the shape that read fastest
    std::vector<read_candidate> read_candidates;
    std::vector<double> tensor_samples, f16_samples, read_samples, copy_samples;
};

/// Measures the three ceilings; throws error without a GPU.
peak measure_peak(int repetitions);

} // namespace attn::cuda
