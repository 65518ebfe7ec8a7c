// bench.reporters -- the columns derived after a run (% of the triad, of the roofline and of the
// peak: Google Benchmark computes rates only once a run ends) and the reporters that add them.
module;
#include <cmath>
#include <iterator>
#include <vector>
#include <benchmark/benchmark.h>
export module bench.reporters;
import attn.count;
import bench.decode;

export namespace bench {

/// % of the ceilings are derived columns: Google Benchmark computes rates after the run, so
/// the reporters add them where both the rate and the case's ceiling are known.
inline void add_derived(benchmark::BenchmarkReporter::Run& r) {
    auto get = [&](const char* k) {
        const auto it = r.counters.find(k);
        return it == r.counters.end() ? 0.0 : it->second.value;
    };
    if (get("kv_gbs") > 0 && get("peak_gbs") > 0) {
        r.counters["pct_triad"] = benchmark::Counter(100.0 * get("kv_gbs") / get("peak_gbs"));
        const double roof = attn::roofline_gbs(get("peak_gbs"), get("peak_gflops"), get("intensity"));
        r.counters["roof_gbs"] = benchmark::Counter(roof);
        r.counters["pct_roof"] = benchmark::Counter(100.0 * get("kv_gbs") / roof);
        r.counters["arith_roof_gbs"] =
            benchmark::Counter(attn::arithmetic_roof_gbs(get("peak_gflops"), get("intensity")));
    }
    if (get("gflops_matmul") > 0 && get("peak_gflops") > 0) // a rate is already per second here
        r.counters["pct_peak"] = benchmark::Counter(100.0 * get("gflops_matmul") / get("peak_gflops"));
    for (auto it = r.counters.begin(); it != r.counters.end();) // JSON has no NaN (a constant's cv is 0/0)
        it = std::isfinite(it->second.value) ? std::next(it) : r.counters.erase(it);
}

/// A reporter that adds the derived columns. The file reporter also holds every run back to
/// the end, so that each decode core can be paired with the triad measured in the same run
/// (pair_triads); the console prints as the runs come.
template <class Base>
class with_derived : public Base {
  public:
    explicit with_derived(bool hold = false) : hold_(hold) {}
    void ReportRuns(const std::vector<benchmark::BenchmarkReporter::Run>& runs) override {
        auto copy = runs;
        for (auto& r : copy) add_derived(r);
        if (hold_)
            held_.insert(held_.end(), copy.begin(), copy.end());
        else
            Base::ReportRuns(copy);
    }
    void Finalize() override {
        if (hold_ && !held_.empty()) {
            pair_triads(held_);
            Base::ReportRuns(held_);
        }
        Base::Finalize();
    }

  private:
    bool hold_;
    std::vector<benchmark::BenchmarkReporter::Run> held_;
};

} // namespace bench
