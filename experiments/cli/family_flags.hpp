// The flags that name a family beyond the q/k/v shapes, shared by run, init, params and flops:
// --family mla with its form and widths (DeepSeek's names) or a named configuration. It imports
// attn.core after its own #includes: include it after every other header.
#pragma once
#include <cstddef>
#include <optional>
#include <string>
#include <CLI/CLI.hpp>
import attn.core;

namespace attn::cli {

struct family_flags {
    std::optional<attn::family> family; ///< a named family (--family): one the shape does not derive
    attn::form form = attn::form::naive;
    std::string config; ///< deepseek-v2, deepseek-v3, deepseek-v2-lite
    std::size_t kv_rank = 0, q_rank = 0, nope = 0, rope = 0, v_head = 0;
    bool q_rank_given = false;
};

/// Adds --family, --form, --config and the MLA widths to `cmd`.
void add_family_flags(CLI::App* cmd, family_flags& f);

/// Whether the flags name MLA (--family mla or --config).
bool names_latent(const family_flags& f);

/// Makes p an MLA layer problem from the flags (d_model and heads: the configuration's, or p's as
/// given); refuses, in one line naming the flag and its value, a width that cannot be, a
/// configuration beside explicit widths, or MLA flags without --family mla. p's lengths, batch
/// and mask are kept.
void apply_family_flags(const family_flags& f, problem& p, bool d_model_given, bool heads_given);

} // namespace attn::cli
