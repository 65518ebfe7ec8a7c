// attn.core:counted -- counting operations: the kinds of scalar operation (op), a table of counts by
// stage and kind (flop_table), and `counted`, a double that tallies every arithmetic operation done
// on it into the active table, by the stage the computation last announced. attn.count's closed
// forms fill a flop_table analytically; running a family's reference layer on counted scalars
// (attn.families) fills one by measurement, and a test holds the two equal.
module;
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string_view>
export module attn.core:counted;
import :problem;

export namespace attn {

/// The kinds of scalar operation the reference performs. A subtraction is counted as an add; sqrt
/// is MLA's RMSNorm's (the rotary embedding's cosines and sines are tables of positions, not
/// counted, like the softmax scale).
enum class op : int { add, mul, div, exp, cmp, sqrt, count_ };

inline constexpr std::size_t n_stages = static_cast<std::size_t>(stage::count_);
inline constexpr std::size_t n_ops = static_cast<std::size_t>(op::count_);

inline constexpr std::string_view op_name(op o) {
    constexpr std::string_view names[] = {"add", "mul", "div", "exp", "cmp", "sqrt"};
    return names[static_cast<int>(o)];
}

/// Operation counts by stage and kind; every operation is one FLOP in the full count.
struct flop_table {
    std::array<std::array<std::uint64_t, n_ops>, n_stages> n{};

    std::uint64_t& at(stage s, op o) { return n[std::size_t(s)][std::size_t(o)]; }
    std::uint64_t at(stage s, op o) const { return n[std::size_t(s)][std::size_t(o)]; }
    std::uint64_t stage_total(stage s) const {
        std::uint64_t t = 0;
        for (auto v : n[std::size_t(s)]) t += v;
        return t;
    }
    std::uint64_t op_total(op o) const {
        std::uint64_t t = 0;
        for (const auto& row : n) t += row[std::size_t(o)];
        return t;
    }
    std::uint64_t total() const {
        std::uint64_t t = 0;
        for (std::size_t s = 0; s < n_stages; ++s) t += stage_total(stage(s));
        return t;
    }
    bool operator==(const flop_table&) const = default;
};

namespace detail {
inline thread_local flop_table* tally = nullptr;
inline thread_local stage current = stage::proj_q;
inline void tick(op o) {
    if (tally) ++tally->at(current, o);
}
} // namespace detail

/// A double that counts every arithmetic operation into the active tally, by the stage the
/// reference last announced. Construction and copies are free; subtraction counts as an add.
struct counted {
    double v = 0;
    counted() = default;
    counted(double x) : v(x) {}

    friend counted operator+(counted a, counted b) {
        detail::tick(op::add);
        return a.v + b.v;
    }
    friend counted operator-(counted a, counted b) {
        detail::tick(op::add);
        return a.v - b.v;
    }
    friend counted operator*(counted a, counted b) {
        detail::tick(op::mul);
        return a.v * b.v;
    }
    friend counted operator/(counted a, counted b) {
        detail::tick(op::div);
        return a.v / b.v;
    }
    friend bool operator<(counted a, counted b) {
        detail::tick(op::cmp);
        return a.v < b.v;
    }
    friend counted exp(counted a) {
        detail::tick(op::exp);
        return std::exp(a.v);
    }
    friend counted sqrt(counted a) {
        detail::tick(op::sqrt);
        return std::sqrt(a.v);
    }
};

/// While alive, counted arithmetic on this thread goes into `t`.
class counting_scope {
  public:
    explicit counting_scope(flop_table& t) : previous_(detail::tally) {
        detail::tally = &t;
        detail::current = stage::proj_q;
    }
    ~counting_scope() { detail::tally = previous_; }
    counting_scope(const counting_scope&) = delete;
    counting_scope& operator=(const counting_scope&) = delete;

  private:
    flop_table* previous_;
};

} // namespace attn
