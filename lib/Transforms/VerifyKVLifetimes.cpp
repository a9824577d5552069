//===- VerifyKVLifetimes.cpp - bt-verify-kv-lifetimes ----------------------===//
//
// Checks that every !bt.kv_cache value is used linearly, released on every
// path, never used after it was consumed, and that `local` caches never leave
// the region that allocated them (docs/design.md §3). See Passes.td for the rules.
//
// The analysis is an abstract interpretation over the IR. The abstract state
// at a program point is the set of *live* cache values (allocated or received
// and not yet consumed), each with the region its storage was allocated in.
// Structured control flow (scf.if / scf.for / scf.while / scf.execute_region)
// is interpreted region by region; unstructured control flow between blocks
// of one region is interpreted in reverse post-order, and the states arriving
// at a block along different edges must agree on the live values (a local
// cache reaching a block argument along several edges gets the innermost of
// their allocation regions; a region is analyzed again when a loop back edge
// deepens one).
//
//===----------------------------------------------------------------------===//

#include "bt/Dialect/BT/IR/BTOps.h"
#include "bt/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/RegionGraphTraits.h"
#include "mlir/Interfaces/CallInterfaces.h"
#include "mlir/Interfaces/ControlFlowInterfaces.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/PostOrderIterator.h"

namespace bt {
#define GEN_PASS_DEF_BTVERIFYKVLIFETIMES
#include "bt/Transforms/Passes.h.inc"
} // namespace bt

using namespace mlir;
using namespace bt;

namespace {

bool isCache(Value v) { return llvm::isa<KVCacheType>(v.getType()); }
bool isLocalCache(Value v) {
  auto t = llvm::dyn_cast<KVCacheType>(v.getType());
  return t && t.isLocal();
}

/// Of two allocation regions of local caches that may flow to the same
/// value, the innermost one (the one the value must not leave). Both are
/// ancestors of the region the value flows into, hence nested in each other.
Region *innermost(Region *a, Region *b) {
  if (!a)
    return b;
  if (!b)
    return a;
  return a->isAncestor(b) ? b : a;
}

/// The abstract state: live cache values (in a deterministic order) mapped to
/// the region their storage was allocated in, and, for diagnostics, the op
/// that consumed each value consumed so far on this path.
struct State {
  llvm::MapVector<Value, Region *> live;
  DenseMap<Value, Operation *> consumedBy;

  bool sameLiveSet(const State &other) const {
    if (live.size() != other.live.size())
      return false;
    for (auto &entry : live)
      if (!other.live.count(entry.first))
        return false;
    return true;
  }
};

/// One way out of a region: its terminator and the state just before it.
struct Exit {
  Operation *terminator;
  State state;
};

/// The state on entry to a block, the terminator of the first edge that
/// reached it (null for the entry block), and whether the block was analyzed
/// already (an edge into it is then a loop back edge). Later edges must agree
/// with the state.
struct BlockEntry {
  State state;
  Operation *from;
  bool visited = false;
};
using BlockEntries = DenseMap<Block *, BlockEntry>;

class LifetimeChecker {
public:
  /// Analyzes one function body. Emits at most one error.
  LogicalResult checkFunction(FunctionOpInterface fn);

private:
  LogicalResult checkRegion(Region &region, State entry,
                            SmallVectorImpl<Exit> &exits);
  LogicalResult checkBlock(Block &block, State &state);
  LogicalResult checkOp(Operation *op, State &state);
  LogicalResult checkBranch(BranchOpInterface branch, State &state,
                            BlockEntries &entries, bool &restart);
  /// Enters `succ` from the terminator `term` with the state `out`, which
  /// must agree with the states of the other edges into `succ`. Sets
  /// `restart` if a back edge deepens the allocation region of a local cache
  /// live into an already analyzed block.
  LogicalResult enterBlock(Operation *term, Block *succ, State out,
                           BlockEntries &entries, bool &restart);

  LogicalResult checkIf(scf::IfOp op, State &state);
  LogicalResult checkFor(scf::ForOp op, State &state);
  LogicalResult checkWhile(scf::WhileOp op, State &state);
  LogicalResult checkExecuteRegion(scf::ExecuteRegionOp op, State &state);
  LogicalResult checkOpaqueRegions(Operation *op);

  /// Requires `v` to be live at `user`.
  LogicalResult requireLive(Value v, Operation *user, const State &state);
  /// Requires `v` live and consumes it.
  LogicalResult consume(Value v, Operation *user, State &state);
  /// Passes the cache operands `values` of the terminator `term` out of its
  /// region into values (results of the parent op) that live in `dest`. If
  /// `origins` is given (one entry per value), merges the allocation region
  /// of each yielded cache into it (see `innermost`).
  LogicalResult yieldOut(Operation *term, ValueRange values, State &state,
                         Region *dest,
                         MutableArrayRef<Region *> origins = {});
  /// The allocation region given to the loop-carried caches of a loop whose
  /// cache inits are `inits` (already checked live in `state`).
  Region *loopCarriedOrigin(ValueRange inits, const State &state,
                            Region *dest);
  /// At the end of a region whose entry state was `outer`: every value live
  /// now but not in `outer` leaks at `term`.
  LogicalResult checkNoLeak(Operation *term, const State &state,
                            const State &outer, StringRef where);
  /// Values of `outer` must still be live in `inner` (region executed
  /// repeatedly, e.g. a loop body).
  LogicalResult checkOuterNotConsumed(const State &outer, const State &inner,
                                      StringRef what);
  /// Merges the exit states of alternative regions of `op` (scf.if branches,
  /// execute_region exits); they must agree on the outer values. `what`
  /// names an exit in diagnostics ("the end of this branch").
  LogicalResult mergeAlternatives(Operation *op, const State &outer,
                                  ArrayRef<Exit> exits, State &result,
                                  StringRef what);

  void noteDef(InFlightDiagnostic &diag, Value v);
};

void LifetimeChecker::noteDef(InFlightDiagnostic &diag, Value v) {
  if (v.getDefiningOp<KVAllocOp>())
    diag.attachNote(v.getLoc()) << "KV cache allocated here";
  else if (llvm::isa<BlockArgument>(v))
    diag.attachNote(v.getLoc()) << "KV cache received here";
  else
    diag.attachNote(v.getLoc()) << "KV cache defined here";
}

LogicalResult LifetimeChecker::requireLive(Value v, Operation *user,
                                           const State &state) {
  if (state.live.count(v))
    return success();
  auto it = state.consumedBy.find(v);
  if (it == state.consumedBy.end()) {
    InFlightDiagnostic diag = user->emitError()
                              << "'" << user->getName()
                              << "' uses a KV cache that is not live here";
    noteDef(diag, v);
    return diag;
  }
  Operation *consumer = it->second;
  bool released = isa<KVReleaseOp>(consumer);
  InFlightDiagnostic diag = user->emitError();
  if (released && isa<KVReleaseOp>(user))
    diag << "KV cache released twice";
  else if (released)
    diag << "'" << user->getName() << "' uses a KV cache after it was released";
  else {
    diag << "'" << user->getName()
         << "' uses a KV cache after it was consumed by '"
         << consumer->getName() << "'";
    // Ops that return the next cache value (bt.kv_append, bt.block_decoder,
    // loops): point at it.
    if (llvm::any_of(consumer->getResults(), isCache))
      diag << " (use the value it returned)";
  }
  diag.attachNote(consumer->getLoc())
      << (released ? "released here" : "consumed here");
  return diag;
}

LogicalResult LifetimeChecker::consume(Value v, Operation *user, State &state) {
  if (failed(requireLive(v, user, state)))
    return failure();
  state.live.remove_if([&](auto &entry) { return entry.first == v; });
  state.consumedBy[v] = user;
  return success();
}

LogicalResult LifetimeChecker::checkNoLeak(Operation *term, const State &state,
                                           const State &outer,
                                           StringRef where) {
  for (auto &entry : state.live) {
    Value v = entry.first;
    if (outer.live.count(v))
      continue;
    InFlightDiagnostic diag = term->emitError()
                              << "KV cache is not released on this path: it "
                                 "is still live at the end of "
                              << where << " (leak)";
    noteDef(diag, v);
    return diag;
  }
  return success();
}

LogicalResult LifetimeChecker::checkOuterNotConsumed(const State &outer,
                                                     const State &inner,
                                                     StringRef what) {
  for (auto &entry : outer.live) {
    Value v = entry.first;
    if (inner.live.count(v))
      continue;
    Operation *consumer = inner.consumedBy.lookup(v);
    Operation *at = consumer ? consumer : v.getParentRegion()->getParentOp();
    InFlightDiagnostic diag =
        at->emitError() << "KV cache defined outside " << what
                        << " is consumed inside it, once per iteration; pass "
                           "it through the loop-carried values instead";
    noteDef(diag, v);
    return diag;
  }
  return success();
}

LogicalResult LifetimeChecker::yieldOut(Operation *term, ValueRange values,
                                        State &state, Region *dest,
                                        MutableArrayRef<Region *> origins) {
  for (auto [idx, v] : llvm::enumerate(values)) {
    if (!isCache(v))
      continue;
    if (failed(requireLive(v, term, state)))
      return failure();
    Region *origin = state.live.lookup(v);
    if (!origins.empty())
      origins[idx] = innermost(origins[idx], origin);
    if (isLocalCache(v) && origin && !origin->isAncestor(dest)) {
      InFlightDiagnostic diag =
          term->emitError()
          << "local KV cache escapes the region it was allocated in (a local "
             "cache lives for one block of the token decoder)";
      noteDef(diag, v);
      return diag;
    }
    if (failed(consume(v, term, state)))
      return failure();
  }
  return success();
}

Region *LifetimeChecker::loopCarriedOrigin(ValueRange inits,
                                           const State &state, Region *dest) {
  // A loop may permute its carried values between iterations, so every
  // carried cache gets the innermost allocation region of all local cache
  // inits. Nothing else can be carried in valid IR: a local cache allocated
  // inside the loop is rejected when yielded out of its region, and an outer
  // one consumed in the loop is rejected by checkOuterNotConsumed.
  Region *origin = nullptr;
  for (Value init : inits)
    if (isLocalCache(init))
      origin = innermost(origin, state.live.lookup(init));
  return origin ? origin : dest;
}

LogicalResult LifetimeChecker::mergeAlternatives(Operation *op,
                                                 const State &outer,
                                                 ArrayRef<Exit> exits,
                                                 State &result,
                                                 StringRef what) {
  // A region without an exit (e.g. an execute_region that loops forever)
  // never returns control: the state after the op is the state before it.
  if (exits.empty()) {
    result = outer;
    return success();
  }
  // Restrict every exit state to the outer values; they must all agree.
  for (size_t i = 0; i < exits.size(); ++i) {
    for (size_t j = 0; j < exits.size(); ++j) {
      if (i == j)
        continue;
      for (auto &entry : exits[i].state.live) {
        Value v = entry.first;
        if (!outer.live.count(v) || exits[j].state.live.count(v))
          continue;
        Operation *leakAt = exits[i].terminator ? exits[i].terminator : op;
        InFlightDiagnostic diag = leakAt->emitError();
        if (exits[i].terminator)
          diag << "KV cache is still live at " << what
               << " but is consumed on another path through the '"
               << op->getName() << "' (it leaks on this path)";
        else
          diag << "KV cache is consumed in the 'then' region of this '"
               << op->getName()
               << "', which has no 'else' region: it leaks when the "
                  "condition is false";
        if (Operation *consumer = exits[j].state.consumedBy.lookup(v))
          diag.attachNote(consumer->getLoc()) << "consumed here";
        return diag;
      }
    }
  }
  result = outer;
  result.live.remove_if(
      [&](auto &entry) { return !exits.front().state.live.count(entry.first); });
  for (const Exit &exit : exits)
    for (auto &entry : exit.state.consumedBy)
      result.consumedBy.insert(entry);
  return success();
}

LogicalResult LifetimeChecker::checkIf(scf::IfOp op, State &state) {
  Region *dest = op->getParentRegion();
  SmallVector<Exit> exits;
  // Allocation regions of the caches yielded as results: the innermost one
  // over all branches (each is checked to outlive the scf.if).
  SmallVector<Region *> origins(op->getNumResults(), nullptr);
  for (Region *region : {&op.getThenRegion(), &op.getElseRegion()}) {
    if (region->empty()) {
      exits.push_back({nullptr, state});
      continue;
    }
    SmallVector<Exit> regionExits;
    if (failed(checkRegion(*region, state, regionExits)))
      return failure();
    for (Exit &exit : regionExits) {
      if (failed(yieldOut(exit.terminator, exit.terminator->getOperands(),
                          exit.state, dest, origins)) ||
          failed(checkNoLeak(exit.terminator, exit.state, state,
                             "this 'scf.if' branch")))
        return failure();
      exits.push_back(std::move(exit));
    }
  }
  State merged;
  if (failed(mergeAlternatives(op, state, exits, merged, "the end of this branch")))
    return failure();
  for (auto [res, origin] : llvm::zip(op->getResults(), origins))
    if (isCache(res))
      merged.live[res] = origin ? origin : dest;
  state = std::move(merged);
  return success();
}

LogicalResult LifetimeChecker::checkFor(scf::ForOp op, State &state) {
  Region *dest = op->getParentRegion();
  Region *origin = loopCarriedOrigin(op.getInitArgs(), state, dest);
  for (Value init : op.getInitArgs())
    if (isCache(init) && failed(consume(init, op, state)))
      return failure();
  State body = state;
  for (BlockArgument arg : op.getRegionIterArgs())
    if (isCache(arg))
      body.live[arg] = origin;
  SmallVector<Exit> exits;
  if (failed(checkRegion(op.getRegion(), body, exits)))
    return failure();
  for (Exit &exit : exits) {
    if (failed(yieldOut(exit.terminator, exit.terminator->getOperands(),
                        exit.state, dest)) ||
        failed(checkNoLeak(exit.terminator, exit.state, state,
                           "the 'scf.for' body")) ||
        failed(checkOuterNotConsumed(state, exit.state, "the 'scf.for' loop")))
      return failure();
  }
  for (OpResult res : op->getResults())
    if (isCache(res))
      state.live[res] = origin;
  return success();
}

LogicalResult LifetimeChecker::checkWhile(scf::WhileOp op, State &state) {
  Region *dest = op->getParentRegion();
  Region *origin = loopCarriedOrigin(op.getInits(), state, dest);
  for (Value init : op.getInits())
    if (isCache(init) && failed(consume(init, op, state)))
      return failure();
  State before = state;
  for (BlockArgument arg : op.getBeforeArguments())
    if (isCache(arg))
      before.live[arg] = origin;
  SmallVector<Exit> exits;
  if (failed(checkRegion(op.getBefore(), before, exits)))
    return failure();
  for (Exit &exit : exits) {
    auto cond = cast<scf::ConditionOp>(exit.terminator);
    if (failed(yieldOut(cond, cond.getArgs(), exit.state, dest)) ||
        failed(checkNoLeak(cond, exit.state, state,
                           "the 'scf.while' condition region")) ||
        failed(checkOuterNotConsumed(state, exit.state, "the 'scf.while' loop")))
      return failure();
  }
  State after = state;
  for (BlockArgument arg : op.getAfterArguments())
    if (isCache(arg))
      after.live[arg] = origin;
  exits.clear();
  if (failed(checkRegion(op.getAfter(), after, exits)))
    return failure();
  for (Exit &exit : exits) {
    if (failed(yieldOut(exit.terminator, exit.terminator->getOperands(),
                        exit.state, dest)) ||
        failed(checkNoLeak(exit.terminator, exit.state, state,
                           "the 'scf.while' body")) ||
        failed(checkOuterNotConsumed(state, exit.state, "the 'scf.while' loop")))
      return failure();
  }
  for (OpResult res : op->getResults())
    if (isCache(res))
      state.live[res] = origin;
  return success();
}

LogicalResult LifetimeChecker::checkExecuteRegion(scf::ExecuteRegionOp op,
                                                  State &state) {
  Region *dest = op->getParentRegion();
  SmallVector<Exit> exits;
  if (failed(checkRegion(op.getRegion(), state, exits)))
    return failure();
  SmallVector<Region *> origins(op->getNumResults(), nullptr);
  for (Exit &exit : exits)
    if (failed(yieldOut(exit.terminator, exit.terminator->getOperands(),
                        exit.state, dest, origins)) ||
        failed(checkNoLeak(exit.terminator, exit.state, state,
                           "the 'scf.execute_region'")))
      return failure();
  State merged;
  if (failed(mergeAlternatives(op, state, exits, merged, "this exit of the region")))
    return failure();
  for (auto [res, origin] : llvm::zip(op->getResults(), origins))
    if (isCache(res))
      merged.live[res] = origin ? origin : dest;
  state = std::move(merged);
  return success();
}

LogicalResult LifetimeChecker::checkOpaqueRegions(Operation *op) {
  WalkResult result = op->walk([&](Operation *nested) {
    if (nested == op)
      return WalkResult::advance();
    auto usesCache = [](ValueRange values) {
      return llvm::any_of(values, [](Value v) { return isCache(v); });
    };
    if (usesCache(nested->getOperands()) || usesCache(nested->getResults())) {
      nested->emitError() << "KV caches cannot be used inside '"
                          << op->getName()
                          << "': only scf.if/for/while/execute_region and "
                             "branches between blocks carry cache lifetimes";
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  return failure(result.wasInterrupted());
}

LogicalResult LifetimeChecker::checkOp(Operation *op, State &state) {
  if (auto ifOp = dyn_cast<scf::IfOp>(op))
    return checkIf(ifOp, state);
  if (auto forOp = dyn_cast<scf::ForOp>(op))
    return checkFor(forOp, state);
  if (auto whileOp = dyn_cast<scf::WhileOp>(op))
    return checkWhile(whileOp, state);
  if (auto exec = dyn_cast<scf::ExecuteRegionOp>(op))
    return checkExecuteRegion(exec, state);
  if (op->getNumRegions() != 0 && !op->hasTrait<OpTrait::IsIsolatedFromAbove>())
    if (failed(checkOpaqueRegions(op)))
      return failure();

  Region *here = op->getParentRegion();
  Region *inherited = nullptr;
  if (auto user = dyn_cast<KVCacheUserOpInterface>(op)) {
    for (OpOperand &operand : op->getOpOperands()) {
      Value v = operand.get();
      if (!isCache(v))
        continue;
      if (user.consumesCache(operand)) {
        inherited = state.live.lookup(v);
        if (failed(consume(v, op, state)))
          return failure();
      } else if (failed(requireLive(v, op, state))) {
        return failure();
      }
    }
  } else if (isa<CallOpInterface>(op)) {
    for (Value v : op->getOperands()) {
      if (!isCache(v))
        continue;
      if (isLocalCache(v)) {
        InFlightDiagnostic diag =
            op->emitError() << "local KV cache escapes the region it was "
                               "allocated in: it is passed to a call";
        noteDef(diag, v);
        return diag;
      }
      if (failed(consume(v, op, state)))
        return failure();
    }
    // The callee would have to allocate it and let it escape.
    if (llvm::any_of(op->getResults(), isLocalCache))
      return op->emitError()
             << "local KV cache escapes the region it was allocated in: it is "
                "returned by a call";
  } else {
    for (Value v : op->getOperands()) {
      if (!isCache(v))
        continue;
      return op->emitError() << "'" << op->getName()
                             << "' cannot use a !bt.kv_cache value: only bt "
                                "KV-cache ops, control flow and calls may";
    }
    // A cache that does not come from bt.kv_alloc, a KV-cache op, control
    // flow or a call has no storage whose lifetime could be checked.
    if (!isa<KVAllocOp>(op) && llvm::any_of(op->getResults(), isCache))
      return op->emitError()
             << "'" << op->getName()
             << "' cannot produce a !bt.kv_cache value: only bt.kv_alloc, bt "
                "KV-cache ops, control flow and calls may";
  }
  for (Value res : op->getResults())
    if (isCache(res))
      state.live[res] = inherited && !isa<KVAllocOp>(op) ? inherited : here;
  return success();
}

LogicalResult LifetimeChecker::checkBlock(Block &block, State &state) {
  for (Operation &op : block.without_terminator())
    if (failed(checkOp(&op, state)))
      return failure();
  return success();
}

LogicalResult LifetimeChecker::enterBlock(Operation *term, Block *succ,
                                          State out, BlockEntries &entries,
                                          bool &restart) {
  auto [it, inserted] = entries.try_emplace(succ, BlockEntry{out, term});
  if (inserted)
    return success();
  BlockEntry &other = it->second;
  if (other.state.sameLiveSet(out)) {
    // The edges may pass local caches of different allocation regions to the
    // same block argument: keep the innermost one (this also updates values
    // whose region deepened in a block analyzed again). If the block was
    // analyzed with a shallower one (a back edge), the region must be
    // analyzed again.
    for (auto &entry : other.state.live) {
      if (!isLocalCache(entry.first))
        continue;
      Region *merged = innermost(entry.second, out.live.lookup(entry.first));
      if (merged == entry.second)
        continue;
      entry.second = merged;
      restart |= other.visited;
    }
    return success();
  }
  // A value live on entry to a loop but not on its back edge was consumed in
  // the loop body: on the next iteration it would be consumed again.
  if (other.visited) {
    for (auto &entry : other.state.live) {
      Value v = entry.first;
      Operation *consumer = out.consumedBy.lookup(v);
      if (out.live.count(v) || !consumer)
        continue;
      InFlightDiagnostic diag =
          consumer->emitError()
          << "KV cache defined outside a loop is consumed inside it, once "
             "per iteration; pass it through the block arguments of the loop "
             "instead";
      noteDef(diag, v);
      return diag;
    }
  }
  // A value live on one edge but not on another leaks on the edge where it is
  // live: the successor cannot consume it on some of its executions. Report at
  // the terminator of that edge, with a note where the other edge consumed it.
  auto report = [&](Operation *leakAt, Value v, const State &otherState) {
    InFlightDiagnostic diag =
        leakAt->emitError()
        << "KV cache is not released on this path: it is still live on this "
           "edge into a successor block but not on another edge into that "
           "block (leak)";
    if (Operation *consumer = otherState.consumedBy.lookup(v))
      diag.attachNote(consumer->getLoc()) << "consumed here";
    noteDef(diag, v);
    return diag;
  };
  for (auto &entry : out.live)
    if (!other.state.live.count(entry.first))
      return report(term, entry.first, other.state);
  for (auto &entry : other.state.live)
    if (!out.live.count(entry.first))
      return report(other.from ? other.from : term, entry.first, out);
  return success();
}

LogicalResult LifetimeChecker::checkBranch(BranchOpInterface branch,
                                           State &state, BlockEntries &entries,
                                           bool &restart) {
  Operation *op = branch;
  // Cache operands of the branch must be forwarded to a successor (a
  // condition or switch flag cannot be a cache).
  SmallVector<bool> forwarded(op->getNumOperands(), false);
  for (unsigned i = 0, e = op->getNumSuccessors(); i < e; ++i) {
    OperandRange range = branch.getSuccessorOperands(i).getForwardedOperands();
    for (unsigned j = 0; j < range.size(); ++j)
      forwarded[range.getBeginOperandIndex() + j] = true;
  }
  for (OpOperand &operand : op->getOpOperands())
    if (isCache(operand.get()) && !forwarded[operand.getOperandNumber()])
      return op->emitError()
             << "'" << op->getName()
             << "' cannot use a !bt.kv_cache value except as a successor "
                "operand";
  for (unsigned i = 0, e = op->getNumSuccessors(); i < e; ++i) {
    Block *succ = op->getSuccessor(i);
    SuccessorOperands operands = branch.getSuccessorOperands(i);
    State out = state;
    unsigned produced = operands.getProducedOperandCount();
    for (auto [idx, v] : llvm::enumerate(operands.getForwardedOperands())) {
      if (!isCache(v))
        continue;
      Region *origin = out.live.lookup(v);
      if (failed(consume(v, op, out)))
        return failure();
      out.live[succ->getArgument(produced + idx)] = origin;
    }
    if (failed(enterBlock(op, succ, std::move(out), entries, restart)))
      return failure();
  }
  return success();
}

LogicalResult LifetimeChecker::checkRegion(Region &region, State entry,
                                           SmallVectorImpl<Exit> &exits) {
  if (region.empty())
    return success();
  BlockEntries entries;
  entries.try_emplace(&region.front(), BlockEntry{std::move(entry), nullptr});
  // In reverse post-order every block but a loop header is visited after all
  // its predecessors, and a loop header after the predecessor that enters it.
  llvm::ReversePostOrderTraversal<Region *> rpot(&region);
  size_t firstExit = exits.size();
  // Analyze again while back edges deepen the allocation region of a loop
  // header's local cache arguments (it only deepens, so this terminates).
  for (bool restart = true; restart;) {
    restart = false;
    exits.truncate(firstExit);
    for (auto &entry : entries)
      entry.second.visited = false;
    for (Block *block : rpot) {
      auto it = entries.find(block);
      if (it == entries.end())
        continue; // Unreachable from the entry block.
      it->second.visited = true;
      State state = it->second.state;
      if (failed(checkBlock(*block, state)))
        return failure();
      Operation *term = block->getTerminator();
      if (auto branch = dyn_cast<BranchOpInterface>(term)) {
        if (failed(checkBranch(branch, state, entries, restart)))
          return failure();
        continue;
      }
      if (term->getNumSuccessors() != 0) {
        for (Value v : term->getOperands())
          if (isCache(v))
            return term->emitError()
                   << "'" << term->getName()
                   << "' cannot pass a KV cache to a successor block: it "
                      "does not implement BranchOpInterface";
        for (Block *succ : term->getSuccessors())
          if (failed(enterBlock(term, succ, state, entries, restart)))
            return failure();
        continue;
      }
      exits.push_back({term, std::move(state)});
    }
  }
  return success();
}

LogicalResult LifetimeChecker::checkFunction(FunctionOpInterface fn) {
  Region &body = fn.getFunctionBody();
  // A declaration: calls to it are checked at the call sites.
  if (body.empty())
    return success();
  State entry;
  for (BlockArgument arg : body.getArguments()) {
    if (!isCache(arg))
      continue;
    if (isLocalCache(arg))
      return mlir::emitError(arg.getLoc())
             << "a local KV cache cannot be a function argument: it lives for "
                "one block of the token decoder and is allocated inside it";
    entry.live[arg] = &body;
  }
  SmallVector<Exit> exits;
  if (failed(checkRegion(body, std::move(entry), exits)))
    return failure();
  for (Exit &exit : exits) {
    Operation *term = exit.terminator;
    for (Value v : term->getOperands()) {
      if (!isCache(v))
        continue;
      if (isLocalCache(v)) {
        InFlightDiagnostic diag =
            term->emitError() << "local KV cache escapes the region it was "
                                 "allocated in: it is returned from the "
                                 "function";
        noteDef(diag, v);
        return diag;
      }
      if (failed(consume(v, term, exit.state)))
        return failure();
    }
    if (failed(checkNoLeak(term, exit.state, State(), "the function")))
      return failure();
  }
  return success();
}

struct VerifyKVLifetimesPass
    : public bt::impl::BTVerifyKVLifetimesBase<VerifyKVLifetimesPass> {
  void runOnOperation() override {
    bool failedAny = false;
    getOperation()->walk([&](FunctionOpInterface fn) {
      LifetimeChecker checker;
      if (failed(checker.checkFunction(fn)))
        failedAny = true;
    });
    if (failedAny)
      signalPassFailure();
    markAllAnalysesPreserved();
  }
};

} // namespace
