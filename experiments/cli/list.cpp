// attnbench list: the registered variants, one line each; then the CUDA kernels (variants/cuda),
// which are not registered variants (the harness does not run them yet), and whether this build
// has them and this machine a GPU.
#include <cstdio>
#include <string>
#include "api.hpp" // attn::cuda (variants/cuda): plain C++17, no module
#include "commands.hpp"
import attn.variants;

namespace attn::cli {

namespace {

/// What each CUDA kernel serves, in one phrase (variants/cuda/README.md has the whole table).
const char* cuda_serves(cuda::kernel k) {
    switch (k) {
    case cuda::kernel::naive:
        return "core and layer, f32/bf16/f16, any head width";
    case cuda::kernel::tiled:
        return "core and layer, f32/bf16/f16, head width <= 256";
    case cuda::kernel::flash:
        return "core and layer, bf16/f16, head width 64 or 128";
    case cuda::kernel::decode:
        return "decode step, f32/bf16/f16/int8 caches";
    case cuda::kernel::hopper:
        return "core and layer, bf16/f16, sm_90a (wgmma, TMA)";
    }
    return "";
}

} // namespace

void add_list(CLI::App& app) {
    auto* cmd = app.add_subcommand("list", "list the registered implementations and the CUDA kernels");
    cmd->callback([] {
        std::printf("%-10s %-16s %-8s %s\n", "variant", "precisions", "threads", "description");
        for (const auto& v : registry()) {
            std::string prec;
            for (const precision p : all_precisions)
                if (v.supports(p)) prec += (prec.empty() ? "" : " ") + std::string(enum_name(p));
            std::printf("%-10s %-16s %-8s %s\n", v.name.c_str(), prec.c_str(), v.threaded ? "yes" : "1",
                        v.description.c_str());
        }
        // the CUDA kernels are registered variants of device cuda (variants/cuda.cpp): --device cuda
        std::printf("\n%-12s %-7s %-48s %s\n", "cuda variant", "device", "serves", "status");
        for (const cuda::kernel k : {cuda::kernel::naive, cuda::kernel::tiled, cuda::kernel::flash,
                                     cuda::kernel::hopper, cuda::kernel::decode})
            std::printf("%-12s %-7s %-48s %s\n", cuda::name(k), "cuda", cuda_serves(k),
                        "ran on an H100 (results/reference/h100-2026-11-26)");
        // query(): device 0, or one line saying why there is none (never throws)
        const cuda::device_info d = cuda::query();
        const std::string gpu = d.present                 ? "GPU " + d.name
                                : cuda::built_with_cuda() ? "no GPU (" + d.reason + ")"
                                                          : "not checked (" + d.reason + ")";
        std::printf("this build: CUDA kernels %s; this machine: %s\n", cuda::built_with_cuda() ? "built" : "not built",
                    gpu.c_str());
    });
}

} // namespace attn::cli
