// The embedded sweep presets: experiments/sweeps/NAME.toml, read at configure time into
// sweep_presets.inc (experiments/CMakeLists.txt), so the binary works from any directory.
#include <string>
#include <utility>
#include <vector>
#include "presets.hpp"

namespace attn::cli {

const std::vector<std::pair<std::string, std::string>>& sweep_presets() {
    static const std::vector<std::pair<std::string, std::string>> presets{
#include "sweep_presets.inc"
    };
    return presets;
}

} // namespace attn::cli
