// libFuzzer target for the sweep-file parser (attn::parse_sweep): toml++ and the schema checks
// behind it. attn::error ("file:line: key ...") is the parser's accepted way of refusing a file;
// anything else -- a crash, a sanitizer report, another exception, a hang -- is a finding. A file
// it accepts must also hold what the rest of the program relies on (checked below).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>
import attn.sweep;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    static const std::vector<std::string> stages{"peak", "check", "params", "flops", "claims", "perf", "decode"};
    const std::string text(reinterpret_cast<const char*>(data), size);
    try {
        const attn::sweep_spec s = attn::parse_sweep(text, "fuzz.toml", stages);
        if (s.grids.empty() || s.repetitions < 1 || s.peak_repetitions < 1 || !(s.min_time > 0)) std::abort();
        for (const auto& g : s.grids) {
            // heads must divide d_model wherever d_head is left to be d_model / heads (a 0 in d_head)
            const bool implicit_d_head = std::find(g.d_head.begin(), g.d_head.end(), 0) != g.d_head.end();
            for (auto d : g.d_model)
                for (auto h : g.heads)
                    if (h == 0 || (implicit_d_head && d % h)) std::abort(); // a grid the harness would refuse
        }
    } catch (const attn::error&) {
    }
    return 0;
}
