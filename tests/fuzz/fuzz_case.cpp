// libFuzzer target for the case JSON reader (from_json for attn::sweep_case, as the harness's
// --case and the report's stored cases/<id>.json are read). Text that is not JSON at all is
// nlohmann's to refuse and is skipped; on a JSON document, attn::error is the reader's accepted
// way of refusing a case, and anything else -- a crash, a sanitizer report, another exception
// (nlohmann's type errors included), a hang -- is a finding. An accepted case must be valid and
// survive a round trip through to_json with the same id.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>
import attn.cases;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const auto j = nlohmann::json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) return 0;
    try {
        const auto c = j.get<attn::sweep_case>();
        c.shape().validate();
        const auto back = nlohmann::json(c).get<attn::sweep_case>();
        if (back.id() != c.id() || back.text() != c.text()) std::abort();
    } catch (const attn::error&) {
    }
    return 0;
}
