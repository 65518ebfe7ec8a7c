// attn.cases -- the one case type (attn.cases:types), its field table (attn.cases:schema: every
// field's JSON key, id part, sweep key, flag and column, written once) and grids into cases
// (attn.cases:expand). Every consumer -- the report's store, the harness, check, the plots -- reads
// the same fields through the table and names a case by id().
export module attn.cases;
export import :types;
export import :schema;
export import :expand;
