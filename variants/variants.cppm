// attn.variants -- the registry of implementations. Each lives in one file of variants/;
// variants/registry.cpp lists them, one line each.
module;
#include <string>
#include <string_view>
#include <vector>
export module attn.variants;
export import attn.core;

export namespace attn {

/// The registered variants of device d (the CPU's by default: those whose kernels run in this
/// process), in registration order (simplest first).
const std::vector<variant>& registry(device d = device::cpu);

/// Every registered variant, every device's.
std::vector<const variant*> all_variants();

/// Adds a variant after the built-in ones of its device (a program's own experiment, a test's throwaway one);
/// call it before anything iterates the registry. Throws attn::error if the name is taken.
void register_variant(variant v);

/// The variant called `name`; throws attn::error listing the known names if there is none.
const variant& find_variant(std::string_view name);

/// Throws attn::error "variant 'V' does not run in P on this CPU (MODEL)" when v has no kernels
/// for precision p here.
void require_precision(const variant& v, precision p);

/// "" when `v` serves problem p (a layer problem; its family, shape and window) in mode m with
/// storage type t (decode: the cache's type) on device d; else one line naming the variant and
/// what it lacks: its device, the family, the precision or cache type, or a limit of its own.
std::string refusal(const variant& v, const problem& p, mode m, dtype t, device d);

/// Throws attn::error with refusal()'s line unless `v` serves the case.
inline void require_serves(const variant& v, const problem& p, mode m, dtype t, device d) {
    const std::string why = refusal(v, p, m, t, d);
    require(why.empty(), why);
}

} // namespace attn
