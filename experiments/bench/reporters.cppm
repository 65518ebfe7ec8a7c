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
import bench.decode;

export namespace bench {

using Run = benchmark::BenchmarkReporter::Run;

/// The case a run measured (its label), or false for a probe or an unreadable label.
inline bool case_of(const Run& r, attn::sweep_case& k) {
    const auto j = nlohmann::json::parse(r.report_label, nullptr, false);
    if (!j.is_object() || j.contains("probe")) return false;
    try {
        k = j.get<attn::sweep_case>();
        return true;
    } catch (const attn::error&) {
        return false;
    }
}

/// The run's figures by attn.figures' table, derived again from its time per call (the
/// alongside probes' medians given: a decode core's shares of them).
inline void derive_run(Run& r, double triad_alongside, double read_alongside) {
    attn::sweep_case k;
    if (!case_of(r, k)) return;
    // an aggregate of times (mean, median) is a time; a spread (stddev, cv) is not
    if (r.run_type == Run::RT_Aggregate && r.aggregate_name != "mean" && r.aggregate_name != "median") return;
    attn::figures f;
    for (const auto& s : attn::counter_table)
        if (const auto it = r.counters.find(std::string(s.name)); it != r.counters.end()) f.put(s.id, it->second.value);
    const std::string& name = r.run_name.function_name;
    const bool core = name.size() > 5 && name.compare(name.size() - 5, 5, "/core") == 0;
    const double seconds = r.GetAdjustedRealTime() / benchmark::GetTimeUnitMultiplier(r.time_unit);
    attn::derive(f, k, core ? attn::part::core : attn::part::run, seconds, triad_alongside, read_alongside);
    for (const auto& s : attn::counter_table) // the derived ones, and the probes alongside
        if (f.contains(s.id)) r.counters[std::string(s.name)] = benchmark::Counter(f.at(s.id));
    for (auto it = r.counters.begin(); it != r.counters.end();) // JSON has no NaN (a constant's cv is 0/0)
        it = std::isfinite(it->second.value) ? std::next(it) : r.counters.erase(it);
}

/// A reporter that adds the derived figures. The file reporter also holds every run back to the
/// end, so that each decode core can be paired with the probes measured in the same run
/// (pair_probes); the console prints as the runs come.
template <class Base>
class with_derived : public Base {
  public:
    explicit with_derived(bool hold = false) : hold_(hold) {}
    void ReportRuns(const std::vector<Run>& runs) override {
        auto copy = runs;
        for (auto& r : copy) derive_run(r, 0, 0);
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
