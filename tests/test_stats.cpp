// The Mann-Whitney test against hand-counted distributions.
#include <vector>
#include <catch2/catch.hpp>
import attn.stats;

using Catch::Matchers::WithinAbs;

TEST_CASE("Mann-Whitney U, exact, against counted arrangements", "[stats]") {
    // {1,2,3} vs {4,5,6}: U = 0; of the C(6,3) = 20 equally likely arrangements one has U = 0
    // and one U = 9, so the two-sided p is 2/20.
    auto r = attn::stats::mann_whitney_u({1, 2, 3}, {4, 5, 6});
    CHECK(r.exact);
    CHECK(r.u == 0);
    CHECK_THAT(r.p, WithinAbs(0.1, 1e-12));
    // five against five, fully separated: 2 / C(10,5) = 2/252
    r = attn::stats::mann_whitney_u({10, 11, 12, 13, 14}, {1, 2, 3, 4, 5});
    CHECK(r.u == 25);
    CHECK_THAT(r.p, WithinAbs(2.0 / 252, 1e-12));
    // {1,3} vs {2,4}: U = 1 (3 > 2). Of C(4,2) = 6 arrangements U takes 0,1,2,2,3,4,
    // so P(U <= 1) = 2/6 and the two-sided p = 4/6.
    r = attn::stats::mann_whitney_u({1, 3}, {2, 4});
    CHECK(r.u == 1);
    CHECK_THAT(r.p, WithinAbs(4.0 / 6, 1e-12));
}

TEST_CASE("Mann-Whitney U with ties uses the normal approximation", "[stats]") {
    const auto r = attn::stats::mann_whitney_u({1, 1, 1, 1}, {1, 1, 1, 1});
    CHECK_FALSE(r.exact);
    CHECK(r.u == 8);
    CHECK(r.p == 1.0);
    CHECK(attn::stats::median({3, 1, 2}) == 2);
    CHECK(attn::stats::median({4, 1, 2, 3}) == 2.5);
}
