// cuBLAS, loaded on first use (dlopen) instead of linked: every binary of the suite links the CUDA
// backend, and linking libcublas made each of them map and initialise libcublas and libcublasLt
// at start, about 0.2 s a process on the 2-core machine (attnbench-bench on one case: 0.03 s
// without it, 0.21-0.24 s with it), which the report pays once per harness process. Only the
// layer's projections and the peak's GEMM call cuBLAS; a build or machine without it says so in
// one line when they first do.
#include <dlfcn.h>
#include <string>
#include <type_traits>
#include "host.cuh"

namespace attn::cuda::detail {

const cublas_api& cublas() {
    static const cublas_api api = [] {
        const std::string so = "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR);
        void* lib = dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
        if (!lib) throw error("cuBLAS could not be loaded: " + std::string(dlerror()));
        auto get = [&](auto& fn, const char* name) {
            fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, name));
            if (!fn) throw error("cuBLAS (" + so + ") has no " + name);
        };
        cublas_api a;
        get(a.create, "cublasCreate_v2");
        get(a.destroy, "cublasDestroy_v2");
        get(a.set_stream, "cublasSetStream_v2");
        get(a.gemm_ex, "cublasGemmEx");
        get(a.status_string, "cublasGetStatusString");
        return a;
    }();
    return api;
}

} // namespace attn::cuda::detail
