//===- CompiledKernelsCache.cpp - CompiledKernels as compile-cache bytes --===//
//
// serializeCompiledKernels / deserializeCompiledKernels (Compiler.h): the
// payload of the compile cache's "kernels" entries, which hold everything
// Compilation::compileKernels returns. Layout: three sections, each a
// little-endian u64 byte count and the bytes: (1) JSON (llvm::json) with the
// kernel interface, the CPU name, the PTX and the GPU chip; (2) the host
// shared object; (3) the CUDA emulator's shared object (may be empty).
//
//===----------------------------------------------------------------------===//

#include "bt/Compiler/Compiler.h"

#include "llvm/Support/Endian.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

using namespace bt;
using namespace bt::compiler;

namespace bt {

static llvm::json::Value toJSON(const TensorSpec &t) {
  return llvm::json::Object{{"name", t.name},
                            {"dtype", t.dtype},
                            {"shape", t.shape},
                            {"dimNames", t.dimNames},
                            {"inout", t.inout},
                            {"hostScalar", t.hostScalar}};
}

static bool fromJSON(const llvm::json::Value &v, TensorSpec &t,
                     llvm::json::Path p) {
  llvm::json::ObjectMapper o(v, p);
  return o && o.map("name", t.name) && o.map("dtype", t.dtype) &&
         o.map("shape", t.shape) && o.map("dimNames", t.dimNames) &&
         o.map("inout", t.inout) && o.map("hostScalar", t.hostScalar);
}

static llvm::json::Value toJSON(const EntryPoint &e) {
  llvm::json::Array inputs, outputs;
  for (const TensorSpec &t : e.inputs)
    inputs.push_back(toJSON(t));
  for (const TensorSpec &t : e.outputs)
    outputs.push_back(toJSON(t));
  return llvm::json::Object{{"name", e.name},
                            {"symbol", e.symbol},
                            {"params", e.params},
                            {"paramDTypes", e.paramDTypes},
                            {"inputs", std::move(inputs)},
                            {"outputs", std::move(outputs)}};
}

static bool fromJSON(const llvm::json::Value &v, EntryPoint &e,
                     llvm::json::Path p) {
  llvm::json::ObjectMapper o(v, p);
  return o && o.map("name", e.name) && o.map("symbol", e.symbol) &&
         o.map("params", e.params) && o.map("paramDTypes", e.paramDTypes) &&
         o.map("inputs", e.inputs) && o.map("outputs", e.outputs);
}

static llvm::json::Value toJSON(const KVMemoryPlan &k) {
  return llvm::json::Object{{"blockLength", k.blockLength},
                            {"globalBytesPerEntry", k.globalBytesPerEntry},
                            {"localBytesPerSequence", k.localBytesPerSequence},
                            {"weightBytes", k.weightBytes},
                            {"source", k.source}};
}

static bool fromJSON(const llvm::json::Value &v, KVMemoryPlan &k,
                     llvm::json::Path p) {
  llvm::json::ObjectMapper o(v, p);
  return o && o.map("blockLength", k.blockLength) &&
         o.map("globalBytesPerEntry", k.globalBytesPerEntry) &&
         o.map("localBytesPerSequence", k.localBytesPerSequence) &&
         o.map("weightBytes", k.weightBytes) && o.map("source", k.source);
}

} // namespace bt

namespace {

void appendSection(std::string &out, llvm::StringRef bytes) {
  char size[8];
  llvm::support::endian::write64le(size, bytes.size());
  out.append(size, sizeof(size));
  out.append(bytes.data(), bytes.size());
}

/// The next section of `rest`, which it drops; std::nullopt if truncated.
std::optional<llvm::StringRef> takeSection(llvm::StringRef &rest) {
  if (rest.size() < 8)
    return std::nullopt;
  uint64_t size = llvm::support::endian::read64le(rest.data());
  rest = rest.drop_front(8);
  if (size > rest.size())
    return std::nullopt;
  llvm::StringRef section = rest.take_front(size);
  rest = rest.drop_front(size);
  return section;
}

} // namespace

std::string bt::compiler::serializeCompiledKernels(
    const CompiledKernels &kernels) {
  llvm::json::Array entries;
  for (const EntryPoint &e : kernels.interface.entryPoints)
    entries.push_back(toJSON(e));
  llvm::json::Object top{
      {"entryPoints", std::move(entries)},
      {"kvPlan", toJSON(kernels.interface.kvPlan)},
      {"cpu", kernels.cpu},
      {"ptx", kernels.ptx},
      {"gpuChip", kernels.gpuChip}};
  std::string json;
  llvm::raw_string_ostream os(json);
  os << llvm::json::Value(std::move(top));
  os.flush();
  std::string out;
  appendSection(out, json);
  appendSection(out, kernels.sharedObject);
  appendSection(out, kernels.cudaEmu);
  return out;
}

llvm::Expected<CompiledKernels>
bt::compiler::deserializeCompiledKernels(llvm::StringRef bytes) {
  llvm::StringRef rest = bytes;
  std::optional<llvm::StringRef> json = takeSection(rest);
  std::optional<llvm::StringRef> so = json ? takeSection(rest) : std::nullopt;
  std::optional<llvm::StringRef> emu = so ? takeSection(rest) : std::nullopt;
  if (!emu || !rest.empty())
    return llvm::createStringError(
        "compiled kernels: truncated or trailing bytes (" +
        llvm::Twine(bytes.size()) + " bytes)");
  llvm::Expected<llvm::json::Value> value = llvm::json::parse(*json);
  if (!value)
    return value.takeError();
  CompiledKernels kernels;
  llvm::json::Path::Root root("compiled kernels");
  llvm::json::ObjectMapper o(*value, root);
  if (!o || !o.map("entryPoints", kernels.interface.entryPoints) ||
      !o.map("kvPlan", kernels.interface.kvPlan) ||
      !o.map("cpu", kernels.cpu) || !o.map("ptx", kernels.ptx) ||
      !o.map("gpuChip", kernels.gpuChip))
    return root.getError();
  kernels.sharedObject = so->str();
  kernels.cudaEmu = emu->str();
  return kernels;
}
