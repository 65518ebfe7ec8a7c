// The sweep presets compiled into the binary (presets.cpp).
#pragma once
#include <string>
#include <utility>
#include <vector>

namespace attn::cli {

/// The embedded presets: names and texts (experiments/sweeps/NAME.toml at configure time).
const std::vector<std::pair<std::string, std::string>>& sweep_presets();

} // namespace attn::cli
