// attn.results:files -- write_atomic, read_text, read_json.
module;
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <system_error>
#include <vector>
#include <unistd.h>
#include <nlohmann/json.hpp>
module attn.results;

namespace attn {

namespace fs = std::filesystem;

namespace {

const char* kind_of(const fs::file_status& s) {
    switch (s.type()) {
    case fs::file_type::regular:
        return "a regular file";
    case fs::file_type::directory:
        return "a directory";
    case fs::file_type::symlink:
        return "a symbolic link";
    case fs::file_type::block:
        return "a block device";
    case fs::file_type::character:
        return "a character device";
    case fs::file_type::fifo:
        return "a FIFO";
    case fs::file_type::socket:
        return "a socket";
    default:
        return "not a regular file";
    }
}

} // namespace

void check_output_file(const std::string& path) {
    require(!path.empty(), "an output path must not be empty");
    std::error_code ec;
    const auto st = fs::symlink_status(path, ec);
    if (ec || st.type() == fs::file_type::not_found || st.type() == fs::file_type::regular) return;
    throw error(path + ": refusing to write over " + kind_of(st) + " (outputs replace regular files only)");
}

void check_output_dir(const std::string& dir) {
    require(!dir.empty(), "an output directory must not be empty");
    std::error_code ec;
    const auto st = fs::symlink_status(dir, ec);
    if (st.type() != fs::file_type::not_found && st.type() != fs::file_type::directory)
        throw error(dir + ": cannot hold outputs: it is " + kind_of(st) + ", not a directory");
    // The folders it would create, made for the probe and removed again: the check leaves the
    // file system as it found it, and a command refused later creates nothing.
    std::vector<fs::path> made;
    for (fs::path p = fs::absolute(dir, ec); !p.empty() && !fs::exists(fs::symlink_status(p, ec));
         p = p.parent_path()) {
        made.push_back(p);
        if (p == p.parent_path()) break;
    }
    auto undo = [&] {
        std::error_code ignored;
        for (const auto& p : made) fs::remove(p, ignored); // deepest first
    };
    fs::create_directories(dir, ec);
    if (ec) {
        undo();
        throw error(dir + ": cannot create the output directory (" + ec.message() + ")");
    }
    const fs::path probe = fs::path(dir) / (".attnbench-probe." + std::to_string(::getpid()));
    const bool ok = bool(std::ofstream(probe, std::ios::binary | std::ios::trunc));
    const std::string why = std::strerror(errno);
    fs::remove(probe, ec);
    undo();
    require(ok, dir + ": cannot write into the output directory (" + why + ")");
}

std::string temporary_for(const std::string& path) {
    // a unique name in the same directory, so the rename stays on one file system and is atomic,
    // and two writers (threads or processes) never share a temporary
    static std::atomic<unsigned> counter{0};
    fs::path tmp(path);
    tmp.replace_filename("." + tmp.filename().string() + ".tmp." + std::to_string(::getpid()) + "." +
                         std::to_string(counter++));
    return tmp.string();
}

void write_atomic(const std::string& path, const std::string& text) {
    check_output_file(path);
    const fs::path dest(path);
    std::error_code ec;
    if (dest.has_parent_path()) {
        fs::create_directories(dest.parent_path(), ec);
        require(!ec, path + ": cannot write (cannot create directory " + dest.parent_path().string() + ": " +
                         ec.message() + ")");
    }
    const fs::path tmp = temporary_for(path);
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

std::string read_text(const std::string& path) {
    std::error_code ec;
    require(!fs::is_directory(path, ec), path + ": cannot read (a directory)");
    std::ifstream f(path, std::ios::binary);
    require(bool(f), path + ": cannot read (" + std::strerror(errno) + ")");
    std::ostringstream text;
    text << f.rdbuf();
    require(!f.bad(), path + ": cannot read (" + std::strerror(errno) + ")");
    return text.str();
}

nlohmann::ordered_json parse_json(const std::string& text, const std::string& where) {
    try {
        return nlohmann::ordered_json::parse(text);
    } catch (const nlohmann::ordered_json::exception& e) {
        throw error(where + ": not valid JSON (" + e.what() + ")");
    }
}

nlohmann::ordered_json read_json(const std::string& path) { return parse_json(read_text(path), path); }

} // namespace attn
