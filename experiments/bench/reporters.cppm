// bench.reporters -- the figures derived after a run from each benchmark's time and the case's
// quantities (attn::derive, the one computation the report applies to peers too: GFLOP/s, the
// decode bandwidths, % of the ceilings and the roofline), and the reporters that add them.
module;
#include <cmath>
#include <iterator>
#include <string>
#include <vector>
#include <benchmark/benchmark.h>
#include <nlohmann/json.hpp>
export module bench.reporters;
import attn.figures;
import bench.probes;
import bench.harness;

export namespace bench {

using Run = benchmark::BenchmarkReporter::Run;

/// The run's figures by attn.figures' table, derived again from its time per call (the
/// alongside probes' medians given: a decode core's shares of them, a call's of the FMA probe's
/// ceiling). The case and the part come from the registry of this process's benchmarks
/// (bench.harness), not from the label.
inline void derive_run(Run& r, const attn::alongside& along) {
    const auto it = registered().find(r.run_name.function_name);
    if (it == registered().end() || !it->second.k) return; // a probe
    // an aggregate of times (mean, median) is a time; a spread (stddev, cv) is not
    if (r.run_type == Run::RT_Aggregate && r.aggregate_name != "mean" && r.aggregate_name != "median") return;
    attn::figures f;
    for (const auto& s : attn::counter_table)
        if (const auto c = r.counters.find(std::string(s.name)); c != r.counters.end())
            f.put(id_of(s), c->second.value);
    const double seconds = r.GetAdjustedRealTime() / benchmark::GetTimeUnitMultiplier(r.time_unit);
    attn::derive(f, *it->second.k, it->second.part, seconds, along);
    for (const auto& s : attn::counter_table) // the derived ones, and the probes alongside
        if (f.contains(id_of(s))) r.counters[std::string(s.name)] = benchmark::Counter(f.at(id_of(s)));
    for (auto c = r.counters.begin(); c != r.counters.end();) // JSON has no NaN (a constant's cv is 0/0)
        c = std::isfinite(c->second.value) ? std::next(c) : r.counters.erase(c);
}

/// A reporter that adds the derived figures. The file reporter also holds every run back to the
/// end, so that each case can be paired with the probes measured in the same run
/// (pair_probes); the console prints as the runs come.
template <class Base>
class with_derived : public Base {
  public:
    explicit with_derived(bool hold = false) : hold_(hold) {}
    void ReportRuns(const std::vector<Run>& runs) override {
        auto copy = runs;
        for (auto& r : copy) derive_run(r, {});
        if (hold_)
            held_.insert(held_.end(), copy.begin(), copy.end());
        else
            Base::ReportRuns(copy);
    }
    void Finalize() override {
        if (hold_ && !held_.empty()) {
            pair_probes(held_, derive_run);
            Base::ReportRuns(held_);
        }
        Base::Finalize();
    }

  private:
    bool hold_;
    std::vector<Run> held_;
};

} // namespace bench
