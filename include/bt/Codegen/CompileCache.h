//===- CompileCache.h - Content-addressed cache of compiled kernels -*- C++ -*-===//
//
// The expensive end of a compile — LLVM IR translation, LLVM's optimization
// pipeline, code generation and linking of the kernel library (CPU host code
// and the CUDA emulator's kernels), and the PTX of the CUDA kernels — is a
// pure function of the MLIR module that enters it, the codegen options, and
// the compiler build. The compile cache stores its product under a BLAKE3
// key of exactly those inputs, as ccache, Triton's ~/.triton/cache and
// JAX's persistent compilation cache do, so that compiling the same model
// again (another artifact kind, other weights of the same config, eval of a
// checkpoint after `compile`) skips it. Off unless a directory is given
// (`bt-run --cache-dir`, $BT_CACHE_DIR); docs/codegen.md, "Compile cache".
//
// Keys hash: the entry kind, the compiler's identity (the GNU build-id of
// the binary that holds this code, and LLVM's version), every codegen option
// by name, and the module printed with its locations and without eliding any
// attribute. A compiler rebuilt from other sources has another build-id, so
// stale entries are never read.
//
// Entries: `<dir>/<64 hex digits>.<kind>`, written to a unique temporary file
// in `<dir>` and renamed into place (readers never see a partial entry;
// concurrent writers of one key write the same bytes). Each holds the magic
// "BTKCACHE", format version 1 (u32 LE), the payload's BLAKE3 hash (32
// bytes) and the payload; an entry that does not check is a miss and is
// replaced. Nothing is ever evicted: remove the directory to reclaim space.
//
//===----------------------------------------------------------------------===//

#ifndef BT_CODEGEN_COMPILECACHE_H
#define BT_CODEGEN_COMPILECACHE_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/BLAKE3.h"
#include "llvm/Support/Error.h"

#include <optional>
#include <string>

namespace mlir {
class Operation;
} // namespace mlir

namespace bt::codegen {

/// The identity of the running compiler: "build-id <hex> llvm <version>",
/// from the NT_GNU_BUILD_ID note of the ELF object that holds this function
/// (the tool's executable when bt's libraries are linked statically).
/// Errors: the object has no build-id note (linked with --build-id=none);
/// the cache cannot tell two builds apart then.
llvm::Expected<std::string> compilerIdentity();

/// The key of one cache entry: a BLAKE3 hash of named fields.
class CompileCacheKey {
public:
  /// `kind`: what the entry holds, also the entry's file extension
  /// ("so": a linked shared object, "ptx": PTX text); [a-z0-9-]+.
  CompileCacheKey(llvm::StringRef kind, llvm::StringRef identity);

  /// Adds `name` = `value` (any bytes; lengths are hashed too, so fields
  /// never run into each other).
  void add(llvm::StringRef name, llvm::StringRef value);
  /// Adds a boolean field `name` (hashed as "1" / "0"). A separate name, not
  /// an `add` overload: a string literal would convert to bool.
  void addFlag(llvm::StringRef name, bool value) {
    add(name, value ? "1" : "0");
  }
  /// Adds `op` printed with its locations, custom form, no attribute
  /// elided (whatever --mlir-elide-* the tool was given).
  void addOperation(llvm::StringRef name, mlir::Operation *op);

  const std::string &kind() const { return kind_; }
  /// The key as 64 lowercase hex digits.
  std::string hex() const;

private:
  std::string kind_;
  llvm::BLAKE3 hasher_;
};

/// A compile cache in one directory.
class CompileCache {
public:
  /// Opens the cache in `dir`, creating the directory (and its parents) if
  /// needed. Errors: `dir` cannot be created or is not a directory.
  static llvm::Expected<CompileCache> open(llvm::StringRef dir);

  const std::string &directory() const { return dir_; }
  /// The path of `key`'s entry.
  std::string entryPath(const CompileCacheKey &key) const;

  /// The payload stored under `key`; std::nullopt when there is none, or
  /// when the entry is unreadable, truncated or fails its hash check.
  std::optional<std::string> lookup(const CompileCacheKey &key) const;

  /// Stores `payload` under `key` atomically (temporary file + rename in the
  /// cache directory). Errors: the temporary file cannot be written or
  /// renamed (e.g. a read-only cache); the cache is unchanged then.
  llvm::Error store(const CompileCacheKey &key, llvm::StringRef payload) const;

private:
  explicit CompileCache(std::string dir) : dir_(std::move(dir)) {}
  std::string dir_;
};

/// An open compile cache and the identity its keys start from.
struct OpenCompileCache {
  CompileCache cache;
  std::string identity;
};

/// The compile cache in `dir` with this compiler's identity, for a compile
/// of `anchor`. std::nullopt when `dir` is empty (no cache asked for), and
/// when the cache cannot be used: no compiler identity (compilerIdentity's
/// error) or a directory CompileCache::open rejects; that is a warning on
/// `anchor` ("... (compiling without the cache)"), never an error, since the
/// compile goes on without the cache.
std::optional<OpenCompileCache> openCompileCache(mlir::Operation *anchor,
                                                 llvm::StringRef dir);

} // namespace bt::codegen

#endif // BT_CODEGEN_COMPILECACHE_H
