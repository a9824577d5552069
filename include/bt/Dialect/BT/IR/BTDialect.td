//===- BTDialect.td - the bt dialect ------------------------*- tablegen -*-===//
//
// The `bt` dialect models the Block Transformer (Ho et al., NeurIPS 2024,
// "Block Transformer: Global-to-Local Language Modeling for Fast Inference").
//
//===----------------------------------------------------------------------===//

#ifndef BT_DIALECT_TD
#define BT_DIALECT_TD

include "mlir/IR/OpBase.td"

def BT_Dialect : Dialect {
  let name = "bt";
  let cppNamespace = "::bt";
  let summary = "The Block Transformer: embedder, block decoder, token decoder "
                "and their KV caches";
  let description = [{
    The `bt` dialect describes a Block Transformer (paper §2) at two levels.

    **Model level.** `bt.embedder` (paper §2.2), `bt.block_decoder` (§2.3),
    `bt.token_decoder` (§2.4), `bt.lm_head` and `bt.cross_entropy` operate on
    whole blocks. Weights are declared once with `bt.param` under the
    official checkpoint tensor names (e.g.
    `@"token_decoder.gpt_neox.layers.0.attention.query_key_value.weight"`)
    and are referenced by symbol, so a checkpoint maps 1:1 onto the IR.

    **Layer level.** The model-level ops decompose into `bt.layer_norm`,
    `bt.linear`, `bt.gelu`, `bt.rotary`, `bt.split_qkv`, `bt.attention`,
    `bt.local_attention`, `bt.prefix_projection`, `bt.embedding_lookup`, ...

    **KV caches** are SSA values of type `!bt.kv_cache` with an explicit
    lifetime: `bt.kv_alloc` → `bt.kv_append` (returns the new cache value;
    the old one is dead) / `bt.kv_attend` (reads) → `bt.kv_release`. The
    `global` scope is the block decoder's cache (one entry per block, lives
    for a sequence); the `local` scope is the token decoder's cache (its inputs of
    one block: P + L_B - 1 entries, L_B for summation; lives for one block). `bt-verify-kv-lifetimes` checks
    that every cache value is used linearly and released on every path.

    Symbols: B batch, N_blk blocks, L_B block length, D block-decoder width,
    T token-decoder width, E = D / L_B embedder width, P prefix length,
    V vocabulary, H heads, hd head dimension.
  }];
  let useDefaultTypePrinterParser = 1;
  let useDefaultAttributePrinterParser = 1;
  let usePropertiesForAttributes = 1;
}

#endif // BT_DIALECT_TD
