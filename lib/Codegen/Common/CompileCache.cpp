//===- CompileCache.cpp - Content-addressed cache of compiled kernels -----===//
//
// See include/bt/Codegen/CompileCache.h and docs/codegen.md, "Compile cache".
//
//===----------------------------------------------------------------------===//

#include "bt/Codegen/CompileCache.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Operation.h"
#include "mlir/IR/OperationSupport.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/Support/Endian.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <cstring>
#include <elf.h>
#include <limits>
#include <link.h>

using namespace bt::codegen;

namespace {

constexpr char kMagic[8] = {'B', 'T', 'K', 'C', 'A', 'C', 'H', 'E'};
constexpr uint32_t kFormatVersion = 1;
constexpr size_t kHashBytes = 32;
constexpr size_t kHeaderBytes = sizeof(kMagic) + 4 + kHashBytes;

/// A raw_ostream that feeds what is written into a BLAKE3 hasher (the module
/// text is never held in memory as a whole).
class HashingStream : public llvm::raw_ostream {
public:
  explicit HashingStream(llvm::BLAKE3 &hasher) : hasher_(hasher) {
    SetUnbuffered();
  }
  uint64_t bytes() const { return bytes_; }

private:
  void write_impl(const char *ptr, size_t size) override {
    hasher_.update(llvm::StringRef(ptr, size));
    bytes_ += size;
  }
  uint64_t current_pos() const override { return bytes_; }
  llvm::BLAKE3 &hasher_;
  uint64_t bytes_ = 0;
};

void addLength(llvm::BLAKE3 &hasher, uint64_t n) {
  char le[8];
  llvm::support::endian::write64le(le, n);
  hasher.update(llvm::StringRef(le, 8));
}

/// Finds the build-id note of the loaded object that contains `address`.
struct BuildIdSearch {
  uintptr_t address;
  std::string hex;
  bool objectFound = false;
};

int visitObject(struct dl_phdr_info *info, size_t, void *data) {
  auto *search = static_cast<BuildIdSearch *>(data);
  bool contains = false;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr) &ph = info->dlpi_phdr[i];
    uintptr_t begin = info->dlpi_addr + ph.p_vaddr;
    if (ph.p_type == PT_LOAD && search->address >= begin &&
        search->address < begin + ph.p_memsz)
      contains = true;
  }
  if (!contains)
    return 0;
  search->objectFound = true;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr) &ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_NOTE)
      continue;
    const char *p =
        reinterpret_cast<const char *>(info->dlpi_addr + ph.p_vaddr);
    const char *end = p + ph.p_memsz;
    auto align4 = [](size_t n) { return (n + 3) & ~size_t(3); };
    while (p + sizeof(ElfW(Nhdr)) <= end) {
      ElfW(Nhdr) note;
      std::memcpy(&note, p, sizeof(note));
      const char *name = p + sizeof(note);
      const char *desc = name + align4(note.n_namesz);
      if (desc + note.n_descsz > end)
        break;
      if (note.n_type == NT_GNU_BUILD_ID && note.n_namesz == 4 &&
          std::memcmp(name, "GNU", 4) == 0 && note.n_descsz > 0) {
        search->hex = llvm::toHex(
            llvm::StringRef(desc, note.n_descsz), /*LowerCase=*/true);
        return 1;
      }
      p = desc + align4(note.n_descsz);
    }
  }
  return 1;
}

} // namespace

llvm::Expected<std::string> bt::codegen::compilerIdentity() {
  static const std::string identity = [] {
    BuildIdSearch search;
    search.address = reinterpret_cast<uintptr_t>(&compilerIdentity);
    dl_iterate_phdr(visitObject, &search);
    if (search.hex.empty())
      return std::string();
    return "build-id " + search.hex + " llvm " LLVM_VERSION_STRING;
  }();
  if (identity.empty())
    return llvm::createStringError(
        "cannot identify this compiler build: its binary has no GNU build-id "
        "note (linked with --build-id=none?), so cached kernels of another "
        "build could not be told apart");
  return identity;
}

CompileCacheKey::CompileCacheKey(llvm::StringRef kind,
                                 llvm::StringRef identity)
    : kind_(kind.str()) {
  add("bt-compile-cache", std::to_string(kFormatVersion));
  add("kind", kind);
  add("compiler", identity);
}

void CompileCacheKey::add(llvm::StringRef name, llvm::StringRef value) {
  addLength(hasher_, name.size());
  hasher_.update(name);
  addLength(hasher_, value.size());
  hasher_.update(value);
}

void CompileCacheKey::addOperation(llvm::StringRef name, mlir::Operation *op) {
  addLength(hasher_, name.size());
  hasher_.update(name);
  // OpPrintingFlags() starts from the tool's --mlir-* printing options; an
  // elided attribute would make two modules one key, so nothing is elided.
  mlir::OpPrintingFlags flags;
  flags.enableDebugInfo(/*enable=*/true, /*prettyForm=*/false)
      .elideLargeElementsAttrs(std::numeric_limits<int64_t>::max())
      .elideLargeResourceString(std::numeric_limits<int64_t>::max());
  HashingStream os(hasher_);
  op->print(os, flags);
  os.flush();
  addLength(hasher_, os.bytes());
}

std::string CompileCacheKey::hex() const {
  llvm::BLAKE3 copy = hasher_;
  llvm::BLAKE3Result<kHashBytes> digest = copy.final<kHashBytes>();
  return llvm::toHex(llvm::ArrayRef<uint8_t>(digest), /*LowerCase=*/true);
}

llvm::Expected<CompileCache> CompileCache::open(llvm::StringRef dir) {
  if (dir.empty())
    return llvm::createStringError("compile cache: empty directory name");
  if (std::error_code ec = llvm::sys::fs::create_directories(dir))
    return llvm::createStringError("compile cache: cannot create directory " +
                                   dir + ": " + ec.message());
  if (!llvm::sys::fs::is_directory(dir))
    return llvm::createStringError("compile cache: " + dir +
                                   " is not a directory");
  return CompileCache(dir.str());
}

std::optional<OpenCompileCache>
bt::codegen::openCompileCache(mlir::Operation *anchor, llvm::StringRef dir) {
  if (dir.empty())
    return std::nullopt;
  llvm::Expected<std::string> identity = compilerIdentity();
  if (!identity) {
    anchor->emitWarning("compile cache off: ")
        << llvm::toString(identity.takeError())
        << " (compiling without the cache)";
    return std::nullopt;
  }
  llvm::Expected<CompileCache> cache = CompileCache::open(dir);
  if (!cache) {
    anchor->emitWarning(llvm::toString(cache.takeError()))
        << " (compiling without the cache)";
    return std::nullopt;
  }
  return OpenCompileCache{std::move(*cache), std::move(*identity)};
}

std::string CompileCache::entryPath(const CompileCacheKey &key) const {
  llvm::SmallString<256> path(dir_);
  llvm::sys::path::append(path, key.hex() + "." + key.kind());
  return std::string(path);
}

std::optional<std::string>
CompileCache::lookup(const CompileCacheKey &key) const {
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> buffer =
      llvm::MemoryBuffer::getFile(entryPath(key), /*IsText=*/false,
                                  /*RequiresNullTerminator=*/false);
  if (!buffer)
    return std::nullopt;
  llvm::StringRef bytes = (*buffer)->getBuffer();
  if (bytes.size() < kHeaderBytes ||
      std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) != 0 ||
      llvm::support::endian::read32le(bytes.data() + sizeof(kMagic)) !=
          kFormatVersion)
    return std::nullopt;
  llvm::StringRef stored = bytes.substr(sizeof(kMagic) + 4, kHashBytes);
  llvm::StringRef payload = bytes.drop_front(kHeaderBytes);
  llvm::BLAKE3Result<kHashBytes> digest =
      llvm::BLAKE3::hash<kHashBytes>(llvm::arrayRefFromStringRef(payload));
  if (stored != llvm::StringRef(reinterpret_cast<const char *>(digest.data()),
                                digest.size()))
    return std::nullopt;
  return payload.str();
}

llvm::Error CompileCache::store(const CompileCacheKey &key,
                                llvm::StringRef payload) const {
  std::string path = entryPath(key);
  llvm::SmallString<256> model(dir_);
  llvm::sys::path::append(model, "tmp-%%%%%%%%%%%%." + key.kind());
  llvm::Expected<llvm::sys::fs::TempFile> temp =
      llvm::sys::fs::TempFile::create(model);
  if (!temp)
    return llvm::createStringError(
        "compile cache: cannot create a temporary file in " + dir_ + ": " +
        llvm::toString(temp.takeError()));
  {
    llvm::raw_fd_ostream os(temp->FD, /*shouldClose=*/false);
    char version[4];
    llvm::support::endian::write32le(version, kFormatVersion);
    llvm::BLAKE3Result<kHashBytes> digest =
        llvm::BLAKE3::hash<kHashBytes>(llvm::arrayRefFromStringRef(payload));
    os.write(kMagic, sizeof(kMagic));
    os.write(version, sizeof(version));
    os.write(reinterpret_cast<const char *>(digest.data()), digest.size());
    os << payload;
    os.flush();
    if (os.has_error()) {
      std::string message = os.error().message();
      os.clear_error();
      llvm::consumeError(temp->discard());
      return llvm::createStringError("compile cache: cannot write " +
                                     temp->TmpName + ": " + message);
    }
  }
  if (llvm::Error e = temp->keep(path))
    return llvm::createStringError("compile cache: cannot write " + path +
                                   ": " + llvm::toString(std::move(e)));
  return llvm::Error::success();
}
