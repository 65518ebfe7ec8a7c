// A variant that exists only in this test binary: naive's kernels under the name "throwaway",
// tagged like a fast variant, registered before main through the registry's one entry point.
// Linked beside the attnbench tool's objects it must show up in a report run (check, the
// "fast" selector's perf cases, perf.json, the figures) with no other edit.
#include <string>
import attn.variants;

namespace {
const bool registered = [] {
    attn::variant v = attn::find_variant("naive");
    v.name = "throwaway";
    v.tags.clear(); // not "loops": the "fast" selector takes it
    v.threaded = false;
    attn::register_variant(v);
    return true;
}();
} // namespace
