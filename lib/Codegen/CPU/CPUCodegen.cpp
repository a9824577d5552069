//===- CPUCodegen.cpp - LLVM dialect → optimized object → shared object ---===//

#include "bt/Codegen/CPU/CPUCodegen.h"
#include "bt/Codegen/CompileCache.h"

#include "bt/Dialect/BT/IR/BTDialect.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/OpenMP/OpenMPToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "mlir/Target/LLVMIR/LLVMTranslationInterface.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Analysis/TargetLibraryInfo.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/Target/TargetOptions.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/TargetParser/SubtargetFeature.h"

#include <mutex>

using namespace mlir;

namespace {

llvm::Error makeError(const llvm::Twine &msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), msg);
}

void initializeNativeTarget() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
  });
}

bool isHost(const bt::CPUCodegenOptions &opts) {
  return opts.cpu.empty() || opts.cpu == "native";
}

struct Target {
  std::string triple, cpu, features;
  std::unique_ptr<llvm::TargetMachine> machine;
};

llvm::CodeGenOptLevel codeGenLevel(unsigned level) {
  switch (level) {
  case 0:
    return llvm::CodeGenOptLevel::None;
  case 1:
    return llvm::CodeGenOptLevel::Less;
  case 2:
    return llvm::CodeGenOptLevel::Default;
  default:
    return llvm::CodeGenOptLevel::Aggressive;
  }
}

llvm::Expected<Target> createTarget(const bt::CPUCodegenOptions &opts) {
  initializeNativeTarget();
  Target t;
  t.triple = llvm::sys::getProcessTriple();
  std::string err;
  const llvm::Target *target = llvm::TargetRegistry::lookupTarget(t.triple, err);
  if (!target)
    return makeError("no LLVM target for " + t.triple + ": " + err);
  llvm::SubtargetFeatures features;
  if (isHost(opts)) {
    t.cpu = bt::getHostCPUName();
    for (const auto &f : llvm::sys::getHostCPUFeatures())
      features.AddFeature(f.getKey(), f.getValue());
  } else {
    t.cpu = opts.cpu;
  }
  if (!opts.features.empty()) {
    llvm::SmallVector<llvm::StringRef> extra;
    llvm::StringRef(opts.features).split(extra, ',', -1, false);
    for (llvm::StringRef f : extra)
      features.AddFeature(f);
  }
  t.features = features.getString();
  llvm::TargetOptions options;
  t.machine.reset(target->createTargetMachine(
      t.triple, t.cpu, t.features, options, llvm::Reloc::PIC_, std::nullopt,
      codeGenLevel(opts.optLevel)));
  if (!t.machine)
    return makeError("could not create a target machine for " + t.triple +
                     " cpu " + t.cpu);
  return t;
}

/// The translation of the bt dialect's attributes that remain on the LLVM
/// dialect functions (bt.name, bt.dims, bt.param, bt.inout on the entry
/// points' arguments): the kernel interface was read from them before
/// (readKernelInterface), so they have no meaning in LLVM IR. Without an
/// interface, LLVM IR translation warns about each one.
struct BTAttributesToLLVMIR : public mlir::LLVMTranslationDialectInterface {
  using LLVMTranslationDialectInterface::LLVMTranslationDialectInterface;
};

/// LLVM dialect → optimized llvm::Module for `target`.
llvm::Expected<std::unique_ptr<llvm::Module>>
translateAndOptimize(ModuleOp module, llvm::LLVMContext &llvmCtx, Target &target,
                     unsigned optLevel, bool unrollLoops, bool vectorMath) {
  DialectRegistry registry;
  registerBuiltinDialectTranslation(registry);
  registerLLVMDialectTranslation(registry);
  registerOpenMPDialectTranslation(registry); // parallel loops (libomp)
  registry.addExtension(+[](MLIRContext *, bt::BTDialect *dialect) {
    dialect->addInterfaces<BTAttributesToLLVMIR>();
  });
  module->getContext()->appendDialectRegistry(registry);

  std::unique_ptr<llvm::Module> llvmModule =
      translateModuleToLLVMIR(module, llvmCtx, "bt_kernels");
  if (!llvmModule)
    return makeError("failed to translate the module to LLVM IR (is it in the "
                     "LLVM dialect? run bt-cpu-pipeline first)");
  llvmModule->setTargetTriple(target.triple);
  llvmModule->setDataLayout(target.machine->createDataLayout());
  for (llvm::Function &f : *llvmModule) {
    if (f.isDeclaration())
      continue;
    f.addFnAttr("target-cpu", target.cpu);
    if (!target.features.empty())
      f.addFnAttr("target-features", target.features);
  }

  llvm::OptimizationLevel level;
  switch (optLevel) {
  case 0:
    level = llvm::OptimizationLevel::O0;
    break;
  case 1:
    level = llvm::OptimizationLevel::O1;
    break;
  case 2:
    level = llvm::OptimizationLevel::O2;
    break;
  default:
    level = llvm::OptimizationLevel::O3;
    break;
  }
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PipelineTuningOptions tuning;
  // LLVM's full unrolling of the static inner loops of linalg-generated nests
  // (e.g. [H, hd] copies) creates basic blocks of thousands of scalar
  // instructions that the vectorizers no longer touch and that the machine
  // schedulers take seconds on; vectorization plus interleaving does better.
  tuning.LoopUnrolling = unrollLoops;
  tuning.LoopInterleaving = optLevel > 1;
  tuning.LoopVectorization = optLevel > 1;
  tuning.SLPVectorization = optLevel > 1;
  llvm::PassBuilder pb(target.machine.get(), tuning);
  // glibc's libmvec lets the loop vectorizer call vector expf/logf/sinf/cosf
  // (e.g. _ZGVdN8v_expf) in the softmax and cross-entropy loops.
  llvm::Triple triple(target.triple);
  llvm::TargetLibraryInfoImpl tlii(triple);
  if (vectorMath && triple.isX86() && triple.isOSLinux())
    tlii.addVectorizableFunctionsFromVecLib(
        llvm::TargetLibraryInfoImpl::LIBMVEC_X86, triple);
  fam.registerPass([&] { return llvm::TargetLibraryAnalysis(tlii); });
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cgam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cgam, mam);
  llvm::ModulePassManager mpm = level == llvm::OptimizationLevel::O0
                                    ? pb.buildO0DefaultPipeline(level)
                                    : pb.buildPerModuleDefaultPipeline(level);
  mpm.run(*llvmModule, mam);
  return std::move(llvmModule);
}

/// ld.lld-19, ld.lld (PATH), /usr/lib/llvm-19/bin/ld.lld.
llvm::Expected<std::string> findLinker(const bt::CPUCodegenOptions &opts) {
  if (!opts.linker.empty())
    return opts.linker;
  for (const char *name : {"ld.lld-19", "ld.lld"})
    if (llvm::ErrorOr<std::string> p = llvm::sys::findProgramByName(name))
      return *p;
  if (llvm::ErrorOr<std::string> p =
          llvm::sys::findProgramByName("ld.lld", {"/usr/lib/llvm-19/bin"}))
    return *p;
  return makeError("cannot find ld.lld (looked for ld.lld-19 and ld.lld in "
                   "PATH and /usr/lib/llvm-19/bin); install lld-19 or set "
                   "CPUCodegenOptions::linker");
}

llvm::Expected<std::string> findLibrary(const bt::CPUCodegenOptions &opts,
                                        llvm::StringRef name) {
  std::vector<std::string> dirs = opts.libraryDirs;
  if (dirs.empty()) {
    std::string multiarch = llvm::Triple(llvm::sys::getProcessTriple())
                                .getArchName()
                                .str() +
                            "-linux-gnu";
    dirs = {"/lib/" + multiarch, "/usr/lib/" + multiarch, "/lib64",
            "/usr/lib64", "/lib", "/usr/lib"};
  }
  for (const std::string &d : dirs) {
    llvm::SmallString<256> p(d);
    llvm::sys::path::append(p, name);
    if (llvm::sys::fs::exists(p))
      return std::string(p);
  }
  return makeError("cannot find " + name + " (searched " +
                   llvm::join(dirs, ", ") + ")");
}

/// Whether `m` calls LLVM's OpenMP runtime (__kmpc_*, from the omp dialect).
bool usesOpenMP(const llvm::Module &m) {
  for (const llvm::Function &f : m)
    if (f.isDeclaration() && f.getName().starts_with("__kmpc_") &&
        !f.use_empty())
      return true;
  return false;
}

/// Removes a directory tree on scope exit.
struct TempDir {
  llvm::SmallString<256> path;
  ~TempDir() {
    if (!path.empty())
      (void)llvm::sys::fs::remove_directories(path);
  }
};

llvm::Expected<std::string> readFile(llvm::StringRef path) {
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> buf =
      llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                  /*RequiresNullTerminator=*/false);
  if (!buf)
    return makeError("cannot read " + path + ": " + buf.getError().message());
  return (*buf)->getBuffer().str();
}

/// The LLVM module of `module` for the CPU of `options`, optimized
/// (createTarget, then translateAndOptimize); `target` receives the target
/// machine.
llvm::Expected<std::unique_ptr<llvm::Module>>
translateForCPU(ModuleOp module, const bt::CPUCodegenOptions &options,
                llvm::LLVMContext &llvmCtx, Target &target) {
  llvm::Expected<Target> created = createTarget(options);
  if (!created)
    return created.takeError();
  target = std::move(*created);
  return translateAndOptimize(module, llvmCtx, target, options.optLevel,
                              options.unrollLoops, options.vectorMath);
}

} // namespace

std::string bt::getHostCPUName() {
  return llvm::sys::getHostCPUName().str();
}

llvm::Expected<std::string>
bt::compileToLLVMIR(ModuleOp module, const CPUCodegenOptions &options) {
  llvm::LLVMContext llvmCtx;
  Target target;
  auto llvmModule = translateForCPU(module, options, llvmCtx, target);
  if (!llvmModule)
    return llvmModule.takeError();
  std::string text;
  llvm::raw_string_ostream os(text);
  (*llvmModule)->print(os, nullptr);
  return os.str();
}

namespace {

/// What linking the kernel library needs, found before anything is compiled
/// (the compile cache's key holds it).
struct LinkInputs {
  std::string linker, libm, libc;
  /// LLVM's OpenMP runtime and glibc's libmvec; empty when absent (an error
  /// only if the kernels turn out to need libomp).
  std::string libomp, libmvec;
};

llvm::Expected<LinkInputs> findLinkInputs(const bt::CPUCodegenOptions &opts) {
  LinkInputs in;
  llvm::Expected<std::string> linker = findLinker(opts);
  if (!linker)
    return linker.takeError();
  in.linker = *linker;
  llvm::Expected<std::string> libm = findLibrary(opts, "libm.so.6");
  if (!libm)
    return libm.takeError();
  in.libm = *libm;
  llvm::Expected<std::string> libc = findLibrary(opts, "libc.so.6");
  if (!libc)
    return libc.takeError();
  in.libc = *libc;
  if (llvm::Expected<std::string> p = findLibrary(opts, "libomp.so.5"))
    in.libomp = *p;
  else
    llvm::consumeError(p.takeError());
  if (opts.vectorMath) {
    if (llvm::Expected<std::string> p = findLibrary(opts, "libmvec.so.1"))
      in.libmvec = *p;
    else
      llvm::consumeError(p.takeError());
  }
  return in;
}

/// Object code of `m` for `target`, linked with ld.lld (in a private
/// temporary directory) into a shared object; returns its bytes.
llvm::Expected<std::string> linkSharedObject(llvm::Module &m, Target &target,
                                             const bt::CPUCodegenOptions &options,
                                             const LinkInputs &in) {
  llvm::SmallString<0> object;
  {
    llvm::raw_svector_ostream os(object);
    llvm::legacy::PassManager codegen;
    if (target.machine->addPassesToEmitFile(codegen, os, nullptr,
                                             llvm::CodeGenFileType::ObjectFile))
      return makeError("the target machine cannot emit object files");
    codegen.run(m);
  }
  TempDir dir;
  if (std::error_code ec =
          llvm::sys::fs::createUniqueDirectory("bt-codegen", dir.path))
    return makeError("cannot create a temporary directory: " + ec.message());
  auto inDir = [&](llvm::StringRef name) {
    llvm::SmallString<256> p(dir.path);
    llvm::sys::path::append(p, name);
    return std::string(p);
  };
  std::string objPath = inDir("kernels.o"), soPath = inDir("kernels.so"),
              errPath = inDir("ld.stderr");
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(objPath, ec);
    if (ec)
      return makeError("cannot write " + objPath + ": " + ec.message());
    os << object;
  }
  llvm::SmallVector<llvm::StringRef> args = {
      in.linker, "-shared", "--eh-frame-hdr", "-z", "noexecstack", "-z",
      "relro", "-z", "now", "--hash-style=gnu", "-O1", "-soname",
      options.soname, "-o", soPath, objPath, "--no-as-needed", in.libm,
      in.libc};
  // LLVM's OpenMP runtime when the parallel loops of bt-cpu-pipeline
  // (convert-scf-to-openmp) call it; the process shares it (one thread pool
  // with OpenBLAS, docs/codegen.md "Threads").
  if (usesOpenMP(m)) {
    if (in.libomp.empty())
      return makeError("the kernels use OpenMP (bt-cpu-pipeline parallel=true) "
                       "but libomp.so.5 was not found; install libomp5-19 or "
                       "compile with parallel=false");
    args.push_back(in.libomp);
  }
  // libmvec (part of glibc) only when the vectorizer called into it.
  if (!in.libmvec.empty())
    args.append({"--as-needed", in.libmvec});
  std::optional<llvm::StringRef> redirects[] = {std::nullopt, errPath, errPath};
  std::string execError;
  int rc = llvm::sys::ExecuteAndWait(in.linker, args, std::nullopt, redirects,
                                     /*SecondsToWait=*/0, /*MemoryLimit=*/0,
                                     &execError);
  if (rc != 0) {
    std::string log;
    if (llvm::Expected<std::string> l = readFile(errPath))
      log = *l;
    else
      llvm::consumeError(l.takeError());
    return makeError("linking the kernel library failed (" + in.linker +
                     ", exit code " + llvm::Twine(rc) + ")" +
                     (execError.empty() ? "" : ": " + execError) + "\n" + log);
  }
  return readFile(soPath);
}

/// Every input of translateAndOptimize and linkSharedObject besides the
/// module (addSharedObjectKeyFields).
void addCodegenFields(bt::codegen::CompileCacheKey &key,
                      const bt::CPUCodegenOptions &o, const Target &target,
                      const LinkInputs &in) {
  key.add("triple", target.triple);
  key.add("cpu", target.cpu);
  key.add("features", target.features);
  key.add("opt-level", std::to_string(o.optLevel));
  key.addFlag("unroll-loops", o.unrollLoops);
  key.addFlag("vector-math", o.vectorMath);
  key.add("soname", o.soname);
  key.add("linker", in.linker);
  key.add("libm", in.libm);
  key.add("libc", in.libc);
  key.add("libomp", in.libomp);
  key.add("libmvec", in.libmvec);
}

/// The compile cache's key of a shared object: the module and every input
/// of translateAndOptimize and linkSharedObject.
bt::codegen::CompileCacheKey sharedObjectKey(ModuleOp module,
                                             const bt::CPUCodegenOptions &o,
                                             const Target &target,
                                             const LinkInputs &in,
                                             llvm::StringRef identity) {
  bt::codegen::CompileCacheKey key("so", identity);
  addCodegenFields(key, o, target, in);
  key.addOperation("module", module);
  return key;
}

} // namespace

llvm::Expected<std::string>
bt::compileToSharedObject(ModuleOp module, const CPUCodegenOptions &options) {
  llvm::Expected<LinkInputs> in = findLinkInputs(options);
  if (!in)
    return in.takeError();
  std::optional<codegen::OpenCompileCache> cache =
      codegen::openCompileCache(module, options.cacheDir);
  llvm::Expected<Target> target = createTarget(options);
  if (!target)
    return target.takeError();
  std::optional<codegen::CompileCacheKey> key;
  if (cache) {
    key = sharedObjectKey(module, options, *target, *in, cache->identity);
    if (std::optional<std::string> hit = cache->cache.lookup(*key))
      return std::move(*hit);
  }
  llvm::LLVMContext llvmCtx;
  auto llvmModule =
      translateAndOptimize(module, llvmCtx, *target, options.optLevel,
                           options.unrollLoops, options.vectorMath);
  if (!llvmModule)
    return llvmModule.takeError();
  llvm::Expected<std::string> so =
      linkSharedObject(**llvmModule, *target, options, *in);
  if (so && cache)
    if (llvm::Error e = cache->cache.store(*key, *so))
      module.emitWarning(llvm::toString(std::move(e)));
  return so;
}

llvm::Error bt::addSharedObjectKeyFields(codegen::CompileCacheKey &key,
                                         const CPUCodegenOptions &options) {
  llvm::Expected<LinkInputs> in = findLinkInputs(options);
  if (!in)
    return in.takeError();
  llvm::Expected<Target> target = createTarget(options);
  if (!target)
    return target.takeError();
  addCodegenFields(key, options, *target, *in);
  return llvm::Error::success();
}
