// attn.stats -- the one median (of repetitions, of samples). The Mann-Whitney U test over
// repetitions is Google Benchmark's compare.py (`attnbench compare`) and scipy in the render step.
module;
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>
export module attn.stats;

export namespace attn::stats {

/// The median; NaN for no values.
inline double median(std::vector<double> v) {
    if (v.empty()) return NAN;
    std::sort(v.begin(), v.end());
    const std::size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

} // namespace attn::stats
