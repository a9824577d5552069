//===- KernelInterface.cpp - the entry points after Phase::Linalg ---------===//
//
// readKernelInterface (include/bt/Compiler/Compiler.h): the tensor specs of
// the entry points, once the front half of the target pipeline has given
// them their final signatures (KV caches as in-out tensors, the weights as
// leading bt.param arguments), and the KV memory plan the artifact carries.
//
//===----------------------------------------------------------------------===//

#include "bt/Codegen/HostScalars.h"
#include "bt/Compiler/Compiler.h"
#include "bt/Dialect/BT/IR/BTDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/StringMap.h"

using namespace mlir;
using namespace bt;

namespace {

/// "F32", "I64", ... (bt.proto DType) of a tensor element type.
std::string dtypeOf(Type elt) {
  if (elt.isF32())
    return "F32";
  if (elt.isInteger(64))
    return "I64";
  if (elt.isInteger(32))
    return "I32";
  return elt.isBF16() ? "BF16" : "F16";
}

TensorSpec tensorSpec(Type type, StringAttr name,
                      ArrayRef<StringRef> dimNames) {
  TensorSpec spec;
  auto t = cast<RankedTensorType>(type);
  if (name)
    spec.name = name.str();
  spec.dtype = dtypeOf(t.getElementType());
  for (int64_t d : t.getShape())
    spec.shape.push_back(ShapedType::isDynamic(d) ? -1 : d);
  for (StringRef d : dimNames)
    spec.dimNames.push_back(d.str());
  return spec;
}

} // namespace

KernelInterface bt::compiler::readKernelInterface(ModuleOp module,
                                                  const KVPlan &plan) {
  KernelInterface interface;
  KVMemoryPlan &kv = interface.kvPlan;
  kv.blockLength = plan.vanilla ? 1 : plan.blockLength;
  kv.globalBytesPerEntry = plan.global.bytesPerEntry();
  kv.localBytesPerSequence = plan.localBytesPerSequence;
  kv.source = plan.source;
  // The weights as the entry points take them: one copy per parameter.
  llvm::StringMap<int64_t> paramBytes;
  for (auto fn : module.getOps<func::FuncOp>()) {
    if (!fn.isPublic() || fn.isExternal())
      continue;
    EntryPoint e;
    e.name = fn.getSymName().str();
    e.symbol = "bt_entry_" + e.name;
    for (StringRef p : BTDialect::getParams(fn))
      e.params.push_back(p.str());
    for (unsigned i = 0; i < fn.getNumArguments(); ++i) {
      // The weights, in bt.params order.
      if (BTDialect::getArgParam(fn, i)) {
        auto t = cast<RankedTensorType>(fn.getArgumentTypes()[i]);
        e.paramDTypes.push_back(dtypeOf(t.getElementType()));
        if (e.params.size() >= e.paramDTypes.size() && t.hasStaticShape())
          paramBytes.try_emplace(e.params[e.paramDTypes.size() - 1],
                                 t.getNumElements() *
                                     t.getElementTypeBitWidth() / 8);
        continue;
      }
      TensorSpec spec =
          tensorSpec(fn.getArgumentTypes()[i], BTDialect::getArgName(fn, i),
                     BTDialect::getArgDims(fn, i));
      spec.inout = BTDialect::isInOutArg(fn, i);
      spec.hostScalar = isHostScalarArg(fn, i);
      e.inputs.push_back(std::move(spec));
    }
    // Results that are in-out arguments are not outputs: the kernel updates
    // those arguments in place (docs/abi.md).
    for (unsigned i = 0; i < fn.getNumResults(); ++i)
      if (!BTDialect::getResultInOutArg(fn, i))
        e.outputs.push_back(tensorSpec(fn.getResultTypes()[i],
                                       BTDialect::getResultName(fn, i),
                                       BTDialect::getResultDims(fn, i)));
    interface.entryPoints.push_back(std::move(e));
  }
  kv.weightBytes = plan.weightBytes;
  if (!paramBytes.empty()) {
    kv.weightBytes = 0;
    for (const auto &p : paramBytes)
      kv.weightBytes += p.getValue();
  }
  return interface;
}
