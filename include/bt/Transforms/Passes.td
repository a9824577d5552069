//===- Passes.td - bt transformation passes -----------------*- tablegen -*-===//

#ifndef BT_TRANSFORMS_PASSES_TD
#define BT_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def BTVerifyKVLifetimes : Pass<"bt-verify-kv-lifetimes"> {
  let summary = "Verify that every !bt.kv_cache value has a linear, complete lifetime";
  let description = [{
    Checks the explicit KV-cache lifetimes of the bt dialect (DESIGN.md §3) on
    every function-like op (and on the op it runs on) by an abstract
    interpretation of the IR that follows `scf.if`, `scf.for`, `scf.while`,
    `scf.execute_region` and unstructured control flow (`cf.br`,
    `cf.cond_br`, any branch op) between blocks:

    1. **Linearity.** A cache value is *consumed* by exactly one op on every
       path: `bt.kv_append` (which returns the next value), `bt.kv_release`,
       `bt.block_decoder` with a cache, a region terminator that yields it, a
       branch that passes it to a successor, `func.return` or `func.call`.
       A second consumption is reported at the second consumer
       ("used after it was consumed"), with a note at the first.
    2. **No use after release.** Reads (`bt.kv_attend`, `bt.kv_length`) must
       happen while the value is live.
    3. **No leak.** Every value allocated (or received as an argument) is
       consumed on every path before its function returns; a value consumed
       on one branch of an `scf.if` (or one successor of a branch) must be
       consumed on all of them. Leaks are reported at the terminator of the
       leaking path with a note at the allocation.
    4. **Local caches stay local.** A `local` cache may flow into nested
       regions but never out of the region that allocated it: it cannot be
       yielded by that region's terminator, returned, passed to a call,
       or be a function argument. (A local cache lives for one block of the
       token decoder, paper §2.4.)
    5. Any other op that takes a cache operand is an error: only ops that
       implement `KVCacheUserOpInterface` and control flow may use caches.

    Ops without cache values are not affected. The pass does not modify IR.
  }];
}

#endif // BT_TRANSFORMS_PASSES_TD
