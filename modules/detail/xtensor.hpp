// xtensor 0.24 for clang 19. Include this instead of xtensor headers directly.
//
// Clang 19 matches template-template parameters by P0522 (a template with defaulted extra
// parameters binds to `template <class, class> class C`), which makes xtensor 0.24's two
// partial specialisations of rebind_container ambiguous for its default shape type,
// svector<size_t, 4>. The explicit specialisations below are the ones xtensor means and are
// preferred over both partials; later xtensor releases resolve it the same way.
#pragma once
#include <cstddef>
#include <memory>
#include <xtensor/xstorage.hpp>
#include <xtensor/xutils.hpp>

namespace xt {
#define ATTN_XT_REBIND(X)                                                                                              \
    template <>                                                                                                        \
    struct rebind_container<X, svector<std::size_t, 4, std::allocator<std::size_t>, true>> {                           \
        using type = svector<X, 4, std::allocator<X>, true>;                                                           \
    };
ATTN_XT_REBIND(std::ptrdiff_t)
ATTN_XT_REBIND(std::size_t)
#undef ATTN_XT_REBIND
} // namespace xt

#include <xtensor/xadapt.hpp>
#include <xtensor/xarray.hpp>
#include <xtensor/xnpy.hpp>
#include <xtensor/xtensor.hpp>
#include <xtensor/xview.hpp>
#include <xtensor/xmanipulation.hpp>
