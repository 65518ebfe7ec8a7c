// attn.results:files -- write_atomic.
module;
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>
#include <unistd.h>
module attn.results;

namespace attn {

namespace fs = std::filesystem;

void write_atomic(const std::string& path, const std::string& text) {
    require(!path.empty(), "cannot write a file with an empty path");
    const fs::path dest(path);
    std::error_code ec;
    if (dest.has_parent_path()) {
        fs::create_directories(dest.parent_path(), ec);
        require(!ec, path + ": cannot write (cannot create directory " + dest.parent_path().string() + ": " +
                         ec.message() + ")");
    }
    // A unique name in the same directory, so the rename stays on one file system and is atomic,
    // and two writers (threads or processes) never share a temporary.
    static std::atomic<unsigned> counter{0};
    fs::path tmp = dest;
    tmp.replace_filename("." + dest.filename().string() + ".tmp." + std::to_string(::getpid()) + "." +
                         std::to_string(counter++));
    auto fail = [&](const std::string& why) {
        std::error_code ignored;
        fs::remove(tmp, ignored);
        throw error(path + ": cannot write (" + why + ")");
    };
    {
        std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
        if (!out) fail(std::strerror(errno));
        out.write(text.data(), std::streamsize(text.size()));
        out.flush();
        if (!out) fail(std::strerror(errno));
        out.close();
        if (out.fail()) fail(std::strerror(errno));
    }
    fs::rename(tmp, dest, ec);
    if (ec) fail(ec.message());
}

} // namespace attn
