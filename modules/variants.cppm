// attn.variants -- the registry of implementations. Each lives in one file of variants/;
// variants/registry.cpp lists them, one line each.
module;
#include <string_view>
#include <vector>
export module attn.variants;
export import attn.core;

export namespace attn {

/// Every registered variant, in registration order (simplest first).
const std::vector<variant>& registry();

/// Adds a variant after the built-in ones (a program's own experiment, a test's throwaway one);
/// call it before anything iterates the registry. Throws attn::error if the name is taken.
void register_variant(variant v);

/// The variant called `name`; throws attn::error listing the known names if there is none.
const variant& find_variant(std::string_view name);

/// Throws attn::error "variant 'V' does not run in P on this CPU (MODEL)" when v has no kernels
/// for precision p here.
void require_precision(const variant& v, precision p);

} // namespace attn
