// libFuzzer target for the .npy reader (attn::npy::load). The reader takes a path, so each input
// is written to one scratch file per process and read back. attn::error is the reader's accepted
// way of refusing a file; anything else -- a crash, a sanitizer report, another exception, a hang,
// an allocation over -rss_limit_mb, or an array whose values do not fill its shape -- is a finding.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>
import attn.npy;

namespace {

// The scratch file is removed by its owner's destructor at exit. (An atexit handler registered
// while the path was being initialised ran after the path's own destructor, read a freed string
// and left one file in the temporary folder per run.)
struct scratch_file {
    std::string path =
        (std::filesystem::temp_directory_path() / ("attnbench-fuzz-npy-" + std::to_string(::getpid()) + ".npy"))
            .string();
    scratch_file() = default;
    scratch_file(const scratch_file&) = delete;
    scratch_file& operator=(const scratch_file&) = delete;
    ~scratch_file() { std::remove(path.c_str()); }
};

const std::string& scratch() {
    static const scratch_file file;
    return file.path;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    {
        std::ofstream out(scratch(), std::ios::binary | std::ios::trunc);
        out.write(reinterpret_cast<const char*>(data), std::streamsize(size));
        if (!out) std::abort(); // the scratch file itself failed: not the reader's fault, but stop
    }
    try {
        const attn::npy::array a = attn::npy::load(scratch());
        std::size_t n = 1;
        for (std::size_t d : a.shape) n *= d;   // cannot wrap: the reader checked the data is there
        if (a.values.size() != n) std::abort(); // the reader lied about what it read
    } catch (const attn::error&) {
    }
    return 0;
}
