// A case field that exists only in this test's binaries: "tile_rows", a made-up axis with a default
// of 0, registered in this one place through the field table's entry point. Linked beside the
// attnbench tool's objects and beside the harness's, it must reach the case's JSON, its id, a
// sweep's [[perf.grid]] keys, the harness's flags, perf.csv and the report's medians table with no
// other edit (tests/report/throwaway_field.sh).
#include <string>
#include <nlohmann/json.hpp>
import attn.cases;

namespace {
const bool registered = [] {
    attn::case_field f;
    f.name = "tile_rows";
    f.label = "tile rows";
    f.kind = attn::value_kind::size;
    f.fallback = 0;
    f.axis = "tile_rows";
    f.flag = "--tile-rows";
    f.help = "a throwaway axis: rows of a made-up tile (0: none)";
    f.tag = "tr";
    attn::register_case_field(f);
    return true;
}();
} // namespace
