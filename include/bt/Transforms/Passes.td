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
       `bt.block_decoder` with a cache, a loop that takes it as an init, a
       region terminator that yields it, a branch that passes it to a
       successor, `func.return` or `func.call`. A second consumption is
       reported at the second consumer ("uses a KV cache after it was
       consumed by ..." or "KV cache released twice"), with a note at the
       first. A cache defined outside a loop (`scf.for`, `scf.while`, or a
       loop of blocks) cannot be consumed inside it, since it would be
       consumed once per iteration: carry it through the loop instead.
    2. **No use after release.** Reads (`bt.kv_attend`, `bt.kv_length`) must
       happen while the value is live ("uses a KV cache after it was
       released"), with a note at the release.
    3. **No leak.** Every value allocated (or received as an argument or
       from a call) is consumed on every path before its function returns; a
       value consumed on one branch of an `scf.if` (or one exit of an
       `scf.execute_region`, or one edge into a block) must be consumed on
       all of them. Leaks are reported at the terminator of the leaking path
       (for an `scf.if` without `else` that consumes a value in `then`: at the
       `scf.if`), with a note at the definition of the value or where another
       path consumed it.
    4. **Local caches stay local.** A `local` cache may flow into nested
       regions but never out of the region that allocated it: it cannot be
       yielded by that region's terminator, returned, passed to a call,
       returned by a call, or be a function argument. (A local cache lives for
       one block of the token decoder, paper §2.4.) A value that may hold
       caches of several allocations (an `scf.if` or `scf.execute_region`
       result, a loop-carried value, a block argument) counts as allocated in
       the innermost of their regions.
    5. **Only KV-cache ops, control flow and calls use caches.** Any other
       op that takes a cache operand, or produces a cache other than
       `bt.kv_alloc`, is an error: only ops that implement
       `KVCacheUserOpInterface`, the control flow above and calls may use
       caches. Caches cannot be used inside the regions of other ops (e.g.
       `linalg.generic`, `scf.index_switch`, `scf.forall`), whose control
       flow the pass does not interpret.

    Each function gets at most one error (the first violation found).
    Function declarations are not checked; calls to them are.

    Ops without cache values are not affected. The pass does not modify IR.
  }];
}

#endif // BT_TRANSFORMS_PASSES_TD
