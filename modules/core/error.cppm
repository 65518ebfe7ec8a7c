// attn.core:error -- how the suite refuses: attn::error (one line naming the bad value and where
// the check that raised it sits) and attn::out_of_memory (a failed allocation that says what it
// was for), with require() and allocating(), the one mechanism for each.
module;
#include <cstdio>
#include <new>
#include <source_location>
#include <stdexcept>
#include <string>
#include <utility>
export module attn.core:error;

export namespace attn {

/// An input or usage error: one line that names the bad value. `where()` tells which check raised it.
class error : public std::runtime_error {
  public:
    explicit error(const std::string& what, std::source_location where = std::source_location::current())
        : std::runtime_error(what), where_(where) {}
    const std::source_location& where() const noexcept { return where_; }

  private:
    std::source_location where_;
};

/// An allocation that failed, saying what it was for ("cannot allocate 34.4 GB for the K/V cache
/// of case X"). A std::bad_alloc, so whatever catches that catches it; the binaries' main turn
/// any bad_alloc into one line and exit status 3.
class out_of_memory : public std::bad_alloc {
  public:
    explicit out_of_memory(std::string what) : what_(std::move(what)) {}
    const char* what() const noexcept override { return what_.c_str(); }

  private:
    std::string what_;
};

/// Runs f(); a failed allocation inside (std::bad_alloc, or std::length_error: a size no
/// container can hold) becomes out_of_memory naming `what` and the `bytes` it needed. The one
/// mechanism for allocation failures: the large allocation sites wrap their work in it.
template <class F>
decltype(auto) allocating(const std::string& what, double bytes, F&& f) {
    try {
        return f();
    } catch (const out_of_memory&) {
        throw; // an inner site named it already
    } catch (const std::bad_alloc&) {
    } catch (const std::length_error&) {
    }
    char size[48];
    std::snprintf(size, sizeof size, "%.3g GB", bytes * 1e-9);
    throw out_of_memory("cannot allocate " + std::string(size) + " for " + what);
}

/// Throws attn::error(message) unless `ok`.
inline void require(bool ok, const std::string& message, std::source_location where = std::source_location::current()) {
    if (!ok) throw error(message, where);
}

} // namespace attn
