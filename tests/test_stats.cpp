// The one median, against values sorted by hand.
#include <cmath>
#include <catch2/catch.hpp>
import attn.stats;

TEST_CASE("median of odd and even counts, unsorted input, none", "[stats]") {
    CHECK(attn::stats::median({3, 1, 2}) == 2);
    CHECK(attn::stats::median({4, 1, 2, 3}) == 2.5);
    CHECK(attn::stats::median({7}) == 7);
    CHECK(std::isnan(attn::stats::median({})));
}
