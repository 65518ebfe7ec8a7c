// attn.results:machine -- /proc and /sys facts, build info, metadata and its JSON.
module;
#include <cstddef>
#include <cstdio>
#include <ctime>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <system_error>
#include <utility>
#include <vector>
#include <omp.h>
#include <sys/utsname.h>
#include <unistd.h>
#include <cblas.h>
#include <xsimd/xsimd.hpp>
#include <nlohmann/json.hpp>
module attn.results;
import attn.kernels; // isa::bf16_path

namespace attn {

namespace fs = std::filesystem;

namespace {

std::string read_first_line(const std::string& file) {
    std::ifstream in(file);
    std::string line;
    std::getline(in, line);
    return line;
}

/// "32K", "1024K", "32M" as /sys writes cache sizes.
std::size_t parse_size(const std::string& s) {
    if (s.empty()) return 0;
    std::size_t pos = 0;
    unsigned long long v = 0;
    try {
        v = std::stoull(s, &pos);
    } catch (...) {
        return 0;
    }
    const char unit = pos < s.size() ? s[pos] : ' ';
    if (unit == 'K' || unit == 'k')
        v <<= 10;
    else if (unit == 'M' || unit == 'm')
        v <<= 20;
    else if (unit == 'G' || unit == 'g')
        v <<= 30;
    return std::size_t(v);
}

/// The value after "key<spaces>: " on the first matching line of a /proc-style file.
std::string proc_field(const std::string& file, const std::string& key) {
    std::ifstream in(file);
    std::string line;
    while (std::getline(in, line)) {
        if (line.compare(0, key.size(), key) != 0) continue;
        const auto colon = line.find(':');
        if (colon == std::string::npos) continue;
        auto value = line.substr(colon + 1);
        const auto first = value.find_first_not_of(" \t");
        return first == std::string::npos ? std::string() : value.substr(first);
    }
    return {};
}

machine_info read_machine() {
    machine_info m;
    m.cpu_model = proc_field("/proc/cpuinfo", "model name");
    if (m.cpu_model.empty()) m.cpu_model = "unknown";
    m.logical_cores = int(::sysconf(_SC_NPROCESSORS_ONLN));
    const fs::path cache_dir = "/sys/devices/system/cpu/cpu0/cache";
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(cache_dir, ec)) {
        const std::string name = entry.path().filename().string();
        if (name.rfind("index", 0) != 0) continue;
        const std::string dir = entry.path().string();
        const std::string level = read_first_line(dir + "/level"), type = read_first_line(dir + "/type");
        const std::size_t size = parse_size(read_first_line(dir + "/size"));
        if (level == "1" && type == "Data")
            m.l1d_bytes = size;
        else if (level == "2" && type != "Instruction")
            m.l2_bytes = size;
        else if (level == "3" && type != "Instruction")
            m.l3_bytes = size;
    }
    const std::string mem = proc_field("/proc/meminfo", "MemTotal"); // "24576000 kB"
    m.memory_bytes = parse_size(mem.empty() ? mem : mem.substr(0, mem.find(' ')) + "K");
    return m;
}

std::string cpu_simd_flags() {
    std::istringstream flags(" " + proc_field("/proc/cpuinfo", "flags") + " ");
    std::string have, flag;
    const char* wanted[] = {"sse4_2",   "avx",      "avx2",     "fma",         "f16c",        "avx512f",
                            "avx512dq", "avx512bw", "avx512vl", "avx512_vnni", "avx512_bf16", "amx_tile"};
    std::vector<std::string> all;
    while (flags >> flag) all.push_back(flag);
    for (const char* w : wanted)
        for (const auto& f : all)
            if (f == w) {
                have += (have.empty() ? "" : " ") + f;
                break;
            }
    return have.empty() ? "unknown" : have;
}

/// What the compiler was allowed to emit (-march) and what xsimd's batch<float> uses.
std::string compiled_simd() {
    std::string s = std::string("xsimd ") + xsimd::default_arch::name() + " (" +
                    std::to_string(xsimd::batch<float>::size) + " x f32);";
#if defined(__AVX512F__)
    s += " AVX512F";
#endif
#if defined(__AVX512BW__)
    s += " AVX512BW";
#endif
#if defined(__AVX512VL__)
    s += " AVX512VL";
#endif
#if defined(__AVX2__)
    s += " AVX2";
#endif
#if defined(__FMA__)
    s += " FMA";
#endif
#if defined(__AVX__) && !defined(__AVX2__)
    s += " AVX";
#endif
#if defined(__SSE4_2__) && !defined(__AVX__)
    s += " SSE4.2";
#endif
    return s;
}

/// The kernel's transparent huge page mode, the bracketed word of
/// /sys/kernel/mm/transparent_hugepage/enabled ("always", "madvise", "never"): whether the big
/// buffers (big_allocator: caches, triad arrays) get 2 MiB pages.
std::string thp_mode() {
    std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");
    std::string line;
    std::getline(f, line);
    const auto a = line.find('['), b = line.find(']');
    return a != std::string::npos && b != std::string::npos && b > a + 1 ? line.substr(a + 1, b - a - 1) : "unknown";
}

std::string os_name() {
    std::ifstream in("/etc/os-release");
    std::string line;
    while (std::getline(in, line))
        if (line.rfind("PRETTY_NAME=", 0) == 0) {
            std::string value = line.substr(12);
            if (value.size() >= 2 && value.front() == '"' && value.back() == '"')
                value = value.substr(1, value.size() - 2);
            return value;
        }
    return "unknown";
}

std::string blas_name() {
    const char* config = openblas_get_config();
    std::string s = config ? config : "OpenBLAS (no config string)";
    while (!s.empty() && s.back() == ' ') s.pop_back();
    return s + "; threads " + std::to_string(openblas_get_num_threads());
}

std::string or_unknown(std::string s) { return s.empty() ? "unknown" : s; }

/// Build and machine facts that do not change within a process.
const metadata& static_metadata() {
    static const metadata m = [] {
        const machine_info& mach = machine();
        struct utsname u{};
        const bool have_uname = ::uname(&u) == 0;
        char host[256] = {};
        ::gethostname(host, sizeof host - 1);
        metadata r;
        r.emplace_back("cpu_model", mach.cpu_model);
        r.emplace_back("cpu_simd_flags", cpu_simd_flags());
        // which bf16 path the kernels take, as attn.kernels:isa says it
        r.emplace_back("bf16_path", kernels::isa::bf16_path());
        r.emplace_back("bf16_dot_over_fma", kernels::isa::bf16_dot_over_fma_text());
        r.emplace_back("logical_cores", std::to_string(mach.logical_cores));
        r.emplace_back("simd", compiled_simd());
        r.emplace_back("l1d_cache", mach.l1d_bytes ? format_bytes(mach.l1d_bytes) : "unknown");
        r.emplace_back("l2_cache", mach.l2_bytes ? format_bytes(mach.l2_bytes) : "unknown");
        r.emplace_back("l3_cache", mach.l3_bytes ? format_bytes(mach.l3_bytes) : "unknown");
        r.emplace_back("memory_total", mach.memory_bytes ? format_bytes(mach.memory_bytes) : "unknown");
        r.emplace_back("transparent_hugepages", thp_mode());
        r.emplace_back("os", os_name());
        r.emplace_back("kernel", have_uname ? std::string(u.sysname) + " " + u.release + " " + u.machine : "unknown");
        r.emplace_back("hostname", or_unknown(host));
        r.emplace_back("compiler", or_unknown(build().compiler));
        r.emplace_back("flags", or_unknown(build().flags));
        r.emplace_back("build_type", or_unknown(build().build_type));
        r.emplace_back("blas", blas_name());
        r.emplace_back("openmp_max_threads", std::to_string(omp_get_max_threads()));
        r.emplace_back("commit", or_unknown(build().commit));
        for (auto& [k, v] : r) {
            // Collapse the double spaces that empty CMake variables leave in the flags.
            std::string t;
            for (char c : v)
                if (!(c == ' ' && (t.empty() || t.back() == ' '))) t += c;
            while (!t.empty() && t.back() == ' ') t.pop_back();
            v = t.empty() ? "unknown" : t;
        }
        return r;
    }();
    return m;
}

std::string utc_now() {
    const std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
    std::tm tm{};
    ::gmtime_r(&t, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return buf;
}

} // namespace

const machine_info& machine() {
    static const machine_info m = read_machine();
    return m;
}

const std::vector<std::string>& metadata_keys() {
    static const std::vector<std::string> keys = {"cpu_model",
                                                  "cpu_simd_flags",
                                                  "bf16_path",
                                                  "bf16_dot_over_fma",
                                                  "logical_cores",
                                                  "simd",
                                                  "l1d_cache",
                                                  "l2_cache",
                                                  "l3_cache",
                                                  "memory_total",
                                                  "transparent_hugepages",
                                                  "os",
                                                  "kernel",
                                                  "hostname",
                                                  "compiler",
                                                  "flags",
                                                  "build_type",
                                                  "blas",
                                                  "openmp_max_threads",
                                                  "commit",
                                                  "date_utc",
                                                  "load_average",
                                                  "seed",
                                                  "threads",
                                                  "preset"};
    return keys;
}

metadata collect_metadata(const run_info& run) {
    metadata m = static_metadata();
    m.emplace_back("date_utc", utc_now());
    const std::string load = read_first_line("/proc/loadavg"); // "0.52 0.58 0.59 1/467 12345"
    std::istringstream fields(load);
    std::string l1, l5, l15;
    fields >> l1 >> l5 >> l15;
    m.emplace_back("load_average", l15.empty() ? "unknown" : l1 + " " + l5 + " " + l15);
    m.emplace_back("seed", std::to_string(run.seed));
    m.emplace_back("threads", std::to_string(run.threads));
    m.emplace_back("preset", or_unknown(run.preset));
    return m;
}

std::string lookup(const metadata& m, const std::string& key) {
    for (const auto& [k, v] : m)
        if (k == key) return v;
    return {};
}

nlohmann::ordered_json metadata_json(const metadata& m) {
    nlohmann::ordered_json j = nlohmann::ordered_json::object();
    for (const auto& [k, v] : m) j[k] = v;
    return j;
}

std::string to_json(const metadata& m, int indent) { return metadata_json(m).dump(indent > 0 ? indent : -1); }

long long proc_status_kib(const std::string& key) {
    std::ifstream f("/proc/self/status");
    std::string line;
    while (std::getline(f, line))
        if (line.rfind(key + ":", 0) == 0) return std::stoll(line.substr(key.size() + 1));
    return -1;
}

bool reset_peak_rss() {
    std::ofstream f("/proc/self/clear_refs");
    f << "5";
    return bool(f);
}

std::string render_metadata(const metadata& m) {
    text_table t({{"key", "", false}, {"value", "", false}});
    for (const auto& [k, v] : m) t.add_row({k, v});
    return t.render();
}

} // namespace attn
