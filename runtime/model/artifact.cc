//===- artifact.cc - compiled artifacts (docs/abi.md) ---------------------===//

#include "bt/runtime/model/artifact.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <limits>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bt/runtime/base/status_macros.h"
#include "bt/runtime/model/config.h"
#include "bt/runtime/model/random_init.h"
#include <zlib.h>

namespace bt::rt {
namespace {

uint64_t AlignUp(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

void PutLE(std::string &out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i)
    out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

uint64_t GetLE(const char *p, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i)
    v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

// zlib's CRC-32 of `bytes`, continuing `crc` (0 to start).
uint32_t Crc32(uint32_t crc, absl::string_view bytes) {
  return static_cast<uint32_t>(
      crc32_z(crc, reinterpret_cast<const Bytef *>(bytes.data()), bytes.size()));
}

// Fuzz builds (BT_FUZZ, fuzz/README.md) compute every checksum but accept a
// mismatch, so that mutated inputs reach the structural checks behind them
// (the usual libFuzzer convention for checksummed formats).
#ifdef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
constexpr bool kVerifyChecksums = false;
#else
constexpr bool kVerifyChecksums = true;
#endif

// Continues `crc` over `n` zero bytes (the padding the writer emits).
uint32_t Crc32Zeros(uint32_t crc, uint64_t n) {
  static const char kZeros[4096] = {};
  for (; n > 0; n -= std::min<uint64_t>(n, sizeof kZeros))
    crc = Crc32(crc, absl::string_view(kZeros, std::min<uint64_t>(n, sizeof kZeros)));
  return crc;
}

// The payload sections of a manifest besides the manifest itself, by the
// name errors use (docs/abi.md); each carries a CRC-32.
std::array<std::pair<const char *, const proto::Section *>, 5>
PayloadSections(const proto::Manifest &m) {
  return {{{"kernels", &m.kernels()},
           {"weights_data", &m.weights_data()},
           {"tokenizer", &m.tokenizer()},
           {"ptx", &m.ptx()},
           {"cuda_emu", &m.cuda_emu()}}};
}

// [offset, offset + size) within [0, limit), overflow-safe.
bool InRange(uint64_t offset, uint64_t size, uint64_t limit) {
  return offset <= limit && size <= limit - offset;
}

struct Range {
  std::string what;
  uint64_t begin, end;
};

// First pair of overlapping non-empty ranges, or empty strings.
std::pair<const Range *, const Range *> FindOverlap(std::vector<Range> &rs) {
  rs.erase(std::remove_if(rs.begin(), rs.end(),
                          [](const Range &r) { return r.end == r.begin; }),
           rs.end());
  std::sort(rs.begin(), rs.end(), [](const Range &a, const Range &b) {
    return a.begin < b.begin;
  });
  for (size_t i = 1; i < rs.size(); ++i)
    if (rs[i].begin < rs[i - 1].end)
      return {&rs[i - 1], &rs[i]};
  return {nullptr, nullptr};
}

} // namespace

//===----------------------------------------------------------------------===//
// Writer
//===----------------------------------------------------------------------===//

ArtifactWriter::ArtifactWriter(proto::Manifest manifest)
    : manifest_(std::move(manifest)) {}

absl::Status ArtifactWriter::AddWeight(const std::string &name,
                                       const Tensor &t) {
  if (name.empty())
    return absl::InvalidArgumentError("artifact: weight with an empty name");
  if (weight_index_.contains(name))
    return absl::InvalidArgumentError(
        absl::StrCat("artifact: duplicate weight '", name, "'"));
  if (!t.valid() || DTypeSize(t.dtype()) == 0)
    return absl::InvalidArgumentError(
        absl::StrCat("artifact: weight '", name, "' has no dtype"));
  auto n = NumElements(t.shape(), DTypeSize(t.dtype()));
  if (!n.ok())
    return absl::InvalidArgumentError(
        absl::StrCat("artifact: weight '", name, "': ", n.status().message()));
  if (t.nbytes() > 0 && t.data() == nullptr)
    return absl::InvalidArgumentError(
        absl::StrCat("artifact: weight '", name, "' has no data"));
  weight_index_[name] = weights_.size();
  weights_.push_back({name, t.Share()});
  return absl::OkStatus();
}

proto::Manifest ArtifactWriter::LaidOutManifest() const {
  proto::Manifest m = manifest_;
  m.set_format_version(kArtifactFormatVersion);
  m.clear_weights();
  m.mutable_kernels()->set_offset(0);
  m.mutable_kernels()->set_size(kernels_.size());
  m.mutable_kernels()->set_crc32(Crc32(0, kernels_));
  const uint64_t wstart = AlignUp(kernels_.size(), kArtifactPageSize);
  uint64_t cur = 0;
  uint32_t wcrc = 0; // over the section as Write() lays it out, padding included
  const bool drawn = m.has_random_init(); // weights listed, not stored
  for (const PendingWeight &w : weights_) {
    proto::Weight *pw = m.add_weights();
    pw->set_name(w.name);
    pw->set_dtype(w.tensor.dtype());
    for (int64_t d : w.tensor.shape())
      pw->add_shape(d);
    pw->set_nbytes(w.tensor.nbytes());
    if (drawn)
      continue; // offset 0, no bytes in the section
    const uint64_t aligned = AlignUp(cur, kTensorAlignment);
    wcrc = Crc32Zeros(wcrc, aligned - cur);
    wcrc = Crc32(wcrc, w.tensor.bytes());
    cur = aligned;
    pw->set_offset(cur);
    cur += w.tensor.nbytes();
  }
  m.mutable_weights_data()->set_offset(wstart);
  m.mutable_weights_data()->set_size(cur);
  m.mutable_weights_data()->set_crc32(wcrc);
  const uint64_t tstart = AlignUp(wstart + cur, kTensorAlignment);
  m.mutable_tokenizer()->set_offset(tokenizer_.empty() ? 0 : tstart);
  m.mutable_tokenizer()->set_size(tokenizer_.size());
  m.mutable_tokenizer()->set_crc32(Crc32(0, tokenizer_));
  const uint64_t pstart = AlignUp(
      tokenizer_.empty() ? wstart + cur : tstart + tokenizer_.size(),
      kTensorAlignment);
  m.mutable_ptx()->set_offset(ptx_.empty() ? 0 : pstart);
  m.mutable_ptx()->set_size(ptx_.size());
  m.mutable_ptx()->set_crc32(Crc32(0, ptx_));
  const uint64_t estart =
      AlignUp(ptx_.empty() ? pstart : pstart + ptx_.size(), kTensorAlignment);
  if (!cuda_emu_.empty()) {
    m.mutable_cuda_emu()->set_offset(estart);
    m.mutable_cuda_emu()->set_size(cuda_emu_.size());
    m.mutable_cuda_emu()->set_crc32(Crc32(0, cuda_emu_));
  }
  return m;
}

template <typename Sink>
absl::Status ArtifactWriter::Emit(const std::string &path,
                                  const std::string &prefix, Sink &out) const {
  const uint64_t payload_start = AlignUp(prefix.size(), kArtifactPageSize);
  proto::Manifest m = LaidOutManifest();
  const uint64_t tend =
      m.cuda_emu().size() > 0 ? m.cuda_emu().offset() + m.cuda_emu().size()
      : m.ptx().size() > 0    ? m.ptx().offset() + m.ptx().size()
      : m.tokenizer().size() > 0
          ? m.tokenizer().offset() + m.tokenizer().size()
          : m.weights_data().offset() + m.weights_data().size();
  const uint64_t manifest_offset = AlignUp(tend, 8);
  std::string manifest_bytes;
  if (!m.SerializeToString(&manifest_bytes) ||
      manifest_bytes.size() > std::numeric_limits<uint32_t>::max())
    return absl::InternalError(
        absl::StrCat(path, ": cannot serialize the manifest"));

  BT_RETURN_IF_ERROR(out.Write(prefix));
  BT_RETURN_IF_ERROR(out.WriteZeros(payload_start - out.offset()));
  BT_RETURN_IF_ERROR(out.Write(kernels_));
  auto pad_to = [&](uint64_t rel) -> absl::Status {
    return out.WriteZeros(payload_start + rel - out.offset());
  };
  BT_RETURN_IF_ERROR(pad_to(m.weights_data().offset()));
  for (int i = 0; i < m.weights_size() && !m.has_random_init(); ++i) {
    BT_RETURN_IF_ERROR(
        pad_to(m.weights_data().offset() + m.weights(i).offset()));
    BT_RETURN_IF_ERROR(out.Write(weights_[i].tensor.bytes()));
  }
  if (!tokenizer_.empty()) {
    BT_RETURN_IF_ERROR(pad_to(m.tokenizer().offset()));
    BT_RETURN_IF_ERROR(out.Write(tokenizer_));
  }
  if (!ptx_.empty()) {
    BT_RETURN_IF_ERROR(pad_to(m.ptx().offset()));
    BT_RETURN_IF_ERROR(out.Write(ptx_));
  }
  if (!cuda_emu_.empty()) {
    BT_RETURN_IF_ERROR(pad_to(m.cuda_emu().offset()));
    BT_RETURN_IF_ERROR(out.Write(cuda_emu_));
  }
  BT_RETURN_IF_ERROR(pad_to(manifest_offset));
  BT_RETURN_IF_ERROR(out.Write(manifest_bytes));
  std::string trailer(kArtifactMagic, sizeof kArtifactMagic);
  PutLE(trailer, payload_start, 8);
  PutLE(trailer, manifest_offset, 8);
  PutLE(trailer, manifest_bytes.size(), 4);
  PutLE(trailer, Crc32(0, manifest_bytes), 4);
  return out.Write(trailer);
}

namespace {

/// Emit's sink for Serialize: the bytes in a string.
class StringSink {
public:
  absl::Status Write(absl::string_view bytes) {
    out_.append(bytes.data(), bytes.size());
    return absl::OkStatus();
  }
  absl::Status WriteZeros(uint64_t n) {
    out_.append(n, '\0');
    return absl::OkStatus();
  }
  uint64_t offset() const { return out_.size(); }
  std::string &str() { return out_; }

private:
  std::string out_;
};

} // namespace

absl::Status ArtifactWriter::Write(const std::string &path) const {
  std::string prefix;
  if (!prefix_path_.empty()) {
    BT_ASSIGN_OR_RETURN(prefix, ReadFile(prefix_path_));
  }
  BT_ASSIGN_OR_RETURN(std::unique_ptr<AtomicFileWriter> out,
                      AtomicFileWriter::Create(path));
  BT_RETURN_IF_ERROR(Emit(path, prefix, *out));
  return out->Commit(prefix_path_.empty() ? 0644 : 0755);
}

absl::StatusOr<std::string> ArtifactWriter::Serialize() const {
  if (!prefix_path_.empty())
    return absl::FailedPreconditionError(
        "ArtifactWriter::Serialize: a prefix file is set (an executable is "
        "written with Write)");
  StringSink out;
  BT_RETURN_IF_ERROR(Emit("<memory>", "", out));
  return std::move(out.str());
}


//===----------------------------------------------------------------------===//
// Reader
//===----------------------------------------------------------------------===//

absl::StatusOr<std::shared_ptr<const Artifact>>
Artifact::Open(const std::string &path) {
  BT_ASSIGN_OR_RETURN(std::shared_ptr<MappedFile> file, MappedFile::Open(path));
  return FromMapping(std::move(file));
}

absl::StatusOr<std::shared_ptr<const Artifact>>
Artifact::FromBytes(const std::string &name, absl::string_view bytes) {
  BT_ASSIGN_OR_RETURN(std::shared_ptr<MappedFile> file,
                      MappedFile::FromBytes(name, bytes));
  return FromMapping(std::move(file));
}

namespace {

/// InvalidArgument "<path>: <msg>": a malformed artifact.
absl::Status BadArtifact(const std::string &path, absl::string_view msg) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": ", msg));
}

/// Checks the weights of the manifest `m` of the artifact `path` (names,
/// dtypes, sizes, 64-byte alignment, inside the weights section, no
/// overlap) and fills `index` (name -> position in m.weights()). Errors:
/// InvalidArgument naming the file and the weight.
absl::Status IndexWeights(const std::string &path, const proto::Manifest &m,
                          absl::flat_hash_map<std::string, int> &index) {
  auto bad = [&](absl::string_view msg) { return BadArtifact(path, msg); };
  std::vector<Range> weights;
  for (int i = 0; i < m.weights_size(); ++i) {
    const proto::Weight &w = m.weights(i);
    const std::string what = absl::StrCat("weight '", w.name(), "'");
    if (w.name().empty())
      return bad(absl::StrCat("weight #", i, " has an empty name"));
    if (!index.emplace(w.name(), i).second)
      return bad(absl::StrCat(what, " appears twice"));
    const size_t itemsize = DTypeSize(w.dtype());
    if (itemsize == 0)
      return bad(absl::StrCat(what, " has unsupported dtype ",
                              DTypeName(w.dtype())));
    std::vector<int64_t> shape(w.shape().begin(), w.shape().end());
    auto n = NumElements(shape, itemsize);
    if (!n.ok())
      return bad(absl::StrCat(what, ": ", n.status().message()));
    if (w.nbytes() != static_cast<uint64_t>(*n) * itemsize)
      return bad(absl::StrCat(what, " has nbytes ", w.nbytes(), ", but ",
                              DTypeName(w.dtype()), ShapeToString(shape),
                              " needs ", static_cast<uint64_t>(*n) * itemsize));
    if (m.has_random_init()) {
      if (w.offset() != 0)
        return bad(absl::StrCat(what, " has offset ", w.offset(),
                                ", but the weights are drawn at load "
                                "(random_init): expected 0"));
      continue;
    }
    if (w.offset() % kTensorAlignment != 0)
      return bad(absl::StrCat(what, " offset ", w.offset(),
                              " is not 64-byte aligned"));
    if (!InRange(w.offset(), w.nbytes(), m.weights_data().size()))
      return bad(absl::StrCat(what, " [", w.offset(), ", +", w.nbytes(),
                              ") runs past the weights section (",
                              m.weights_data().size(), " bytes)"));
    weights.push_back({what, w.offset(), w.offset() + w.nbytes()});
  }
  if (auto [x, y] = FindOverlap(weights); x != nullptr)
    return bad(absl::StrCat(x->what, " [", x->begin, ", ", x->end, ") and ",
                            y->what, " [", y->begin, ", ", y->end,
                            ") overlap"));

  return absl::OkStatus();
}

/// Checks the weight list of an artifact whose weights are drawn at load
/// (random_init): an empty weights section and exactly ExpectedParams(config)
/// in order, F32, with the expected shapes (what RandomInitWeights draws).
/// Errors: InvalidArgument naming the file and the first difference.
absl::Status CheckDrawnWeights(const std::string &path,
                               const proto::Manifest &m) {
  auto bad = [&](absl::string_view msg) { return BadArtifact(path, msg); };
  if (m.weights_data().size() != 0)
    return bad(absl::StrCat("the weights are drawn at load (random_init), "
                            "but the weights section holds ",
                            m.weights_data().size(), " bytes"));
  BT_RETURN_IF_ERROR(ValidateModelConfig(m.config(), path + ": config"));
  const std::vector<ParamSpec> expected = ExpectedParams(m.config());
  if (expected.size() != static_cast<size_t>(m.weights_size()))
    return bad(absl::StrCat("the weights are drawn at load (random_init): "
                            "the config has ", expected.size(),
                            " parameters, the manifest lists ",
                            m.weights_size(), " weights"));
  for (size_t i = 0; i < expected.size(); ++i) {
    const proto::Weight &w = m.weights(static_cast<int>(i));
    const std::vector<int64_t> shape(w.shape().begin(), w.shape().end());
    if (w.name() != expected[i].name || w.dtype() != DType::F32 ||
        shape != expected[i].shape)
      return bad(absl::StrCat(
          "the weights are drawn at load (random_init): weight #", i, " is '",
          w.name(), "' ", DTypeName(w.dtype()), ShapeToString(shape),
          ", but the config's parameter #", i, " is '", expected[i].name,
          "' F32", ShapeToString(expected[i].shape)));
  }
  return absl::OkStatus();
}

/// Checks the entry points of `m` (unique names, symbols, params that are
/// weights of `index`, tensor specs with known dtypes, dims >= -1, in-out
/// only on inputs, dim_names of the spec's rank). Errors: InvalidArgument
/// naming the file and the entry point.
absl::Status CheckEntryPoints(const std::string &path, const proto::Manifest &m,
                              const absl::flat_hash_map<std::string, int> &index) {
  auto bad = [&](absl::string_view msg) { return BadArtifact(path, msg); };
  std::set<std::string> eps;
  for (const proto::EntryPoint &ep : m.entry_points()) {
    const std::string what = absl::StrCat("entry point '", ep.name(), "'");
    if (ep.name().empty())
      return bad("an entry point has an empty name");
    if (!eps.insert(ep.name()).second)
      return bad(absl::StrCat(what, " appears twice"));
    if (ep.symbol().empty())
      return bad(absl::StrCat(what, " has no symbol"));
    for (const std::string &p : ep.params())
      if (!index.contains(p))
        return bad(absl::StrCat(what, " takes param '", p,
                                "', which is not a weight of the artifact"));
    for (const auto &[kind, specs] :
         {std::make_pair("input", &ep.inputs()),
          std::make_pair("output", &ep.outputs())}) {
      std::set<std::string> names;
      for (const proto::TensorSpec &s : *specs) {
        if (s.name().empty() || !names.insert(s.name()).second)
          return bad(absl::StrCat(what, " has an empty or duplicate ", kind,
                                  " name '", s.name(), "'"));
        if (DTypeSize(s.dtype()) == 0)
          return bad(absl::StrCat(what, " ", kind, " '", s.name(),
                                  "' has unsupported dtype ",
                                  DTypeName(s.dtype())));
        for (int64_t d : s.shape())
          if (d < -1)
            return bad(absl::StrCat(what, " ", kind, " '", s.name(),
                                    "' has dim ", d,
                                    " (expected >= 0, or -1 for dynamic)"));
        if (s.inout() && std::string(kind) == "output")
          return bad(absl::StrCat(what, " output '", s.name(),
                                  "' is marked inout (in-out arguments are "
                                  "inputs and are not returned)"));
        if (s.dim_names_size() != 0 && s.dim_names_size() != s.shape_size())
          return bad(absl::StrCat(what, " ", kind, " '", s.name(), "' has ",
                                  s.dim_names_size(), " dim_names for rank ",
                                  s.shape_size()));
      }
    }
  }
  return absl::OkStatus();
}

} // namespace

absl::StatusOr<std::shared_ptr<const Artifact>>
Artifact::FromMapping(std::shared_ptr<MappedFile> file) {
  const std::string &path = file->path();
  auto bad = [&](absl::string_view msg) { return BadArtifact(path, msg); };
  const uint64_t size = file->size();
  if (size < kArtifactTrailerSize)
    return bad(absl::StrCat("no bt artifact: the file (", size,
                            " bytes) is shorter than the 32-byte trailer"));
  const char *trailer = file->data() + size - kArtifactTrailerSize;
  if (std::memcmp(trailer, kArtifactMagicV1, sizeof kArtifactMagicV1) == 0)
    return absl::FailedPreconditionError(absl::StrCat(
        path, ": artifact format 1 (\"BTARTIF1\", without section "
              "checksums) is no longer read: compile it again"));
  if (std::memcmp(trailer, kArtifactMagic, sizeof kArtifactMagic) != 0)
    return bad("no bt artifact: the file does not end with a trailer with "
               "magic \"BTARTIF2\"");
  const uint64_t payload_start = GetLE(trailer + 8, 8);
  const uint64_t manifest_offset = GetLE(trailer + 16, 8);
  const uint64_t manifest_size = GetLE(trailer + 24, 4);
  const uint32_t manifest_crc = static_cast<uint32_t>(GetLE(trailer + 28, 4));
  if (payload_start % kArtifactPageSize != 0)
    return bad(absl::StrCat("payload_start ", payload_start,
                            " is not a multiple of 4096"));
  if (payload_start > size - kArtifactTrailerSize)
    return bad(absl::StrCat("payload_start ", payload_start,
                            " is past the trailer (file is ", size,
                            " bytes; truncated?)"));
  const uint64_t payload_size = size - kArtifactTrailerSize - payload_start;
  if (!InRange(manifest_offset, manifest_size, payload_size))
    return bad(absl::StrCat("manifest [", manifest_offset, ", +",
                            manifest_size, ") runs past the payload (",
                            payload_size, " bytes; truncated?)"));

  std::shared_ptr<Artifact> a(new Artifact());
  a->payload_start_ = payload_start;
  const char *payload = file->data() + payload_start;
  // A checksum mismatch: the file changed after it was written.
  auto damaged = [&](absl::string_view what, uint32_t recorded,
                     uint32_t actual) {
    return absl::DataLossError(absl::StrFormat(
        "%s: the %s is damaged: its CRC-32 is 0x%08x, but 0x%08x was "
        "recorded when it was written (the file changed afterwards; compile "
        "it again)",
        path, what, actual, recorded));
  };
  if (uint32_t crc = Crc32(0, absl::string_view(payload + manifest_offset,
                                                manifest_size));
      kVerifyChecksums && crc != manifest_crc)
    return damaged("manifest", manifest_crc, crc);
  if (manifest_size > static_cast<uint64_t>(std::numeric_limits<int>::max()) ||
      !a->manifest_.ParseFromArray(payload + manifest_offset,
                                   static_cast<int>(manifest_size)))
    return bad("the manifest does not parse as a bt.proto.Manifest");
  const proto::Manifest &m = a->manifest_;
  if (m.format_version() != kArtifactFormatVersion)
    return absl::FailedPreconditionError(absl::StrCat(
        path, ": unknown artifact format_version ", m.format_version(),
        " (this runtime reads version ", kArtifactFormatVersion, ")"));

  // Sections.
  std::vector<Range> sections = {
      {"manifest", manifest_offset, manifest_offset + manifest_size}};
  for (const auto &[name, s] : PayloadSections(m)) {
    if (!InRange(s->offset(), s->size(), payload_size))
      return bad(absl::StrCat(name, " section [", s->offset(), ", +",
                              s->size(), ") runs past the payload (",
                              payload_size, " bytes)"));
    sections.push_back({name, s->offset(), s->offset() + s->size()});
  }
  if (m.weights_data().offset() % kArtifactPageSize != 0)
    return bad(absl::StrCat("weights_data section offset ",
                            m.weights_data().offset(),
                            " is not a multiple of 4096"));
  if (auto [x, y] = FindOverlap(sections); x != nullptr)
    return bad(absl::StrCat("the ", x->what, " [", x->begin, ", ", x->end,
                            ") and ", y->what, " [", y->begin, ", ", y->end,
                            ") sections overlap"));

  BT_RETURN_IF_ERROR(IndexWeights(path, m, a->weight_index_));
  if (m.has_random_init())
    BT_RETURN_IF_ERROR(CheckDrawnWeights(path, m));
  BT_RETURN_IF_ERROR(CheckEntryPoints(path, m, a->weight_index_));
  // Checksums, last (the structure is checked first), before any section is
  // used (the kernels are dlopen'ed, the weights read as tensors).
  for (const auto &[name, s] : PayloadSections(m))
    if (uint32_t crc =
            Crc32(0, absl::string_view(payload + s->offset(), s->size()));
        kVerifyChecksums && crc != s->crc32())
      return damaged(absl::StrCat(name, " section"), s->crc32(), crc);
  a->file_ = std::move(file);
  return std::shared_ptr<const Artifact>(std::move(a));
}

absl::string_view Artifact::Section(const proto::Section &s) const {
  return absl::string_view(file_->data() + payload_start_ + s.offset(),
                           s.size());
}

absl::string_view Artifact::kernels() const { return Section(manifest_.kernels()); }
absl::string_view Artifact::tokenizer() const {
  return Section(manifest_.tokenizer());
}
absl::string_view Artifact::ptx() const { return Section(manifest_.ptx()); }
absl::string_view Artifact::cuda_emu() const {
  return Section(manifest_.cuda_emu());
}

const proto::Weight *Artifact::FindWeight(const std::string &name) const {
  auto it = weight_index_.find(name);
  return it == weight_index_.end() ? nullptr : &manifest_.weights(it->second);
}

absl::StatusOr<Tensor> Artifact::GetWeight(const std::string &name) const {
  const proto::Weight *w = FindWeight(name);
  if (w == nullptr)
    return absl::NotFoundError(
        absl::StrCat(path(), ": no weight '", name, "'"));
  if (manifest_.has_random_init()) {
    absl::MutexLock lock(&drawn_mutex_);
    if (drawn_ == nullptr) {
      absl::StatusOr<std::map<std::string, Tensor>> drawn =
          RandomInitWeights(manifest_.config(), manifest_.random_init().seed());
      if (!drawn.ok())
        return absl::Status(drawn.status().code(),
                            absl::StrCat(path(), ": drawing the weights: ",
                                         drawn.status().message()));
      drawn_ = std::make_unique<std::map<std::string, Tensor>>(
          std::move(*drawn));
    }
    return drawn_->at(name).Share();
  }
  const char *p = file_->data() + payload_start_ +
                  manifest_.weights_data().offset() + w->offset();
  return Tensor::Borrow(w->dtype(),
                        std::vector<int64_t>(w->shape().begin(), w->shape().end()),
                        const_cast<char *>(p), file_);
}

const proto::EntryPoint *
Artifact::FindEntryPoint(const std::string &name) const {
  for (const proto::EntryPoint &ep : manifest_.entry_points())
    if (ep.name() == name)
      return &ep;
  return nullptr;
}

} // namespace bt::rt
