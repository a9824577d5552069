//===- StridedCopiesToLinalg.cpp - non-contiguous memref.copy → linalg.copy ===//
//
// bt-strided-copies-to-linalg: keeps the kernel library free of the MLIR
// runtime's memrefCopy by expanding copies that are not a plain memcpy.
//
//===----------------------------------------------------------------------===//

#include "bt/Codegen/Passes.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

namespace bt {
#define GEN_PASS_DEF_BTSTRIDEDCOPIESTOLINALG
#include "bt/Codegen/Passes.h.inc"
} // namespace bt

using namespace mlir;

namespace {

/// Copies between identity-layout memrefs become llvm.memcpy in
/// finalize-memref-to-llvm; everything else would call memrefCopy.
bool isContiguous(Type type) {
  auto t = dyn_cast<MemRefType>(type);
  return t && t.getLayout().isIdentity();
}

struct StridedCopiesToLinalgPass
    : public bt::impl::BTStridedCopiesToLinalgBase<StridedCopiesToLinalgPass> {
  using BTStridedCopiesToLinalgBase::BTStridedCopiesToLinalgBase;

  void runOnOperation() override {
    SmallVector<memref::CopyOp> copies;
    getOperation()->walk([&](memref::CopyOp copy) {
      if (contiguous || !isContiguous(copy.getSource().getType()) ||
          !isContiguous(copy.getTarget().getType()))
        copies.push_back(copy);
    });
    for (memref::CopyOp copy : copies) {
      if (!isa<MemRefType>(copy.getSource().getType()) ||
          !isa<MemRefType>(copy.getTarget().getType())) {
        copy.emitOpError("unranked copies are not supported by the kernel "
                         "library");
        return signalPassFailure();
      }
      OpBuilder b(copy);
      b.create<linalg::CopyOp>(copy.getLoc(), copy.getSource(), copy.getTarget());
      copy.erase();
    }
  }
};

} // namespace
