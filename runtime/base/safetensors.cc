//===- safetensors.cc - safetensors reader and writer ---------------------===//

#include "bt/runtime/base/safetensors.h"

#include <algorithm>
#include <cstring>
#include <set>

#include "absl/strings/str_cat.h"
#include "bt/runtime/base/status_macros.h"
#include "nlohmann/json.hpp"

namespace bt::rt {
namespace {

using json = nlohmann::json;
using ordered_json = nlohmann::ordered_json;

absl::Status Bad(const std::string &path, absl::string_view msg) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": ", msg));
}

absl::Status BadTensor(const std::string &path, const std::string &name,
                       absl::string_view msg) {
  return absl::InvalidArgumentError(
      absl::StrCat(path, ": tensor '", name, "': ", msg));
}

uint64_t ReadLE64(const char *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i)
    v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

// A non-negative JSON integer (rejects floats, booleans, negatives).
bool AsUint(const json &j, uint64_t &out) {
  if (j.is_number_unsigned()) {
    out = j.get<uint64_t>();
    return true;
  }
  if (j.is_number_integer() && j.get<int64_t>() >= 0) {
    out = static_cast<uint64_t>(j.get<int64_t>());
    return true;
  }
  return false;
}

/// One tensor entry `name` of the header of `path`: `v` (an object with
/// dtype, shape and data_offsets) checked against the data region of
/// `data_size` bytes. Errors: InvalidArgument naming the file and tensor.
absl::StatusOr<SafetensorsEntry> ParseEntry(const std::string &path,
                                            const std::string &name,
                                            const json &v, uint64_t data_size) {
  if (!v.is_object())
    return BadTensor(path, name,
                     absl::StrCat("entry is a JSON ", v.type_name(),
                                  ", expected an object with dtype, shape "
                                  "and data_offsets"));
  SafetensorsEntry e;
  e.name = name;
  auto dt = v.find("dtype");
  if (dt == v.end())
    return BadTensor(path, name, "missing 'dtype'");
  if (!dt->is_string())
    return BadTensor(path, name, "'dtype' is not a string");
  auto parsed = ParseDTypeName(dt->get<std::string>());
  if (!parsed.ok())
    return BadTensor(path, name, parsed.status().message());
  e.dtype = *parsed;

  auto sh = v.find("shape");
  if (sh == v.end())
    return BadTensor(path, name, "missing 'shape'");
  if (!sh->is_array())
    return BadTensor(path, name, "'shape' is not an array");
  for (const json &d : *sh) {
    uint64_t u;
    if (!AsUint(d, u) ||
        u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      return BadTensor(path, name,
                       absl::StrCat("'shape' must be non-negative integers, "
                                    "got ", sh->dump()));
    e.shape.push_back(static_cast<int64_t>(u));
  }
  auto numel = NumElements(e.shape, DTypeSize(e.dtype));
  if (!numel.ok())
    return BadTensor(path, name, numel.status().message());

  auto off = v.find("data_offsets");
  if (off == v.end())
    return BadTensor(path, name, "missing 'data_offsets'");
  if (!off->is_array() || off->size() != 2 || !AsUint((*off)[0], e.begin) ||
      !AsUint((*off)[1], e.end))
    return BadTensor(path, name,
                     absl::StrCat("'data_offsets' must be [begin, end] with "
                                  "non-negative integers, got ",
                                  off->dump()));
  if (e.begin > e.end)
    return BadTensor(path, name,
                     absl::StrCat("data_offsets ", off->dump(),
                                  ": begin is after end"));
  if (e.end > data_size)
    return BadTensor(path, name,
                     absl::StrCat("data_offsets ", off->dump(),
                                  " run past the data region (", data_size,
                                  " bytes)"));
  const uint64_t expected =
      static_cast<uint64_t>(*numel) * DTypeSize(e.dtype);
  if (e.end - e.begin != expected)
    return BadTensor(
        path, name,
        absl::StrCat("data_offsets ", off->dump(), " hold ", e.end - e.begin,
                     " bytes, but ", DTypeName(e.dtype),
                     ShapeToString(e.shape), " needs ", expected));
  return e;
}

} // namespace

absl::StatusOr<SafetensorsFile> SafetensorsFile::Open(const std::string &path) {
  BT_ASSIGN_OR_RETURN(std::shared_ptr<MappedFile> file, MappedFile::Open(path));
  const uint64_t size = file->size();
  if (size < 8)
    return Bad(path, absl::StrCat("file is ", size,
                                  " bytes, shorter than the 8-byte header "
                                  "length of a safetensors file"));
  const uint64_t n = ReadLE64(file->data());
  if (n > kMaxSafetensorsHeaderBytes)
    return Bad(path, absl::StrCat("header length ", n, " exceeds the limit of ",
                                  kMaxSafetensorsHeaderBytes, " bytes"));
  if (n > size - 8)
    return Bad(path, absl::StrCat("header length ", n, " runs past the end of "
                                  "the file (", size, " bytes)"));
  if (n < 2)
    return Bad(path, absl::StrCat("header length ", n,
                                  " is too small for a JSON object"));
  const char *hb = file->data() + 8;

  // Parse, detecting duplicate top-level keys (nlohmann keeps the last one
  // silently, which would hide an ambiguous tensor).
  std::set<std::string> seen;
  std::string duplicate;
  json header;
  try {
    header = json::parse(
        hb, hb + n,
        [&](int depth, json::parse_event_t event, json &parsed) {
          if (event == json::parse_event_t::key && depth == 1) {
            std::string k = parsed.get<std::string>();
            if (!seen.insert(k).second && duplicate.empty())
              duplicate = k;
          }
          return true;
        });
  } catch (const json::exception &e) {
    return Bad(path, absl::StrCat("header is not valid JSON: ", e.what()));
  }
  if (!header.is_object())
    return Bad(path, absl::StrCat("header is a JSON ", header.type_name(),
                                  ", expected an object"));
  if (!duplicate.empty())
    return Bad(path, absl::StrCat("header lists '", duplicate, "' twice"));

  SafetensorsFile f;
  f.path_ = path;
  f.data_start_ = 8 + n;
  const uint64_t data_size = size - f.data_start_;

  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string &name = it.key();
    const json &v = it.value();
    if (name == "__metadata__") {
      if (!v.is_object())
        return Bad(path, absl::StrCat("__metadata__ is a JSON ", v.type_name(),
                                      ", expected an object of strings"));
      for (auto m = v.begin(); m != v.end(); ++m) {
        if (!m.value().is_string())
          return Bad(path, absl::StrCat("__metadata__['", m.key(), "'] is a ",
                                        m.value().type_name(),
                                        ", expected a string"));
        f.metadata_[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    if (name.empty())
      return Bad(path, "header has a tensor with an empty name");
    BT_ASSIGN_OR_RETURN(SafetensorsEntry e,
                        ParseEntry(path, name, v, data_size));
    f.entries_.emplace(name, std::move(e));
  }

  // Overlaps: sort the non-empty ranges by begin.
  std::vector<const SafetensorsEntry *> byOffset;
  for (const auto &[_, e] : f.entries_)
    if (e.end > e.begin)
      byOffset.push_back(&e);
  std::sort(byOffset.begin(), byOffset.end(),
            [](const SafetensorsEntry *a, const SafetensorsEntry *b) {
              return a->begin < b->begin;
            });
  for (size_t i = 1; i < byOffset.size(); ++i)
    if (byOffset[i]->begin < byOffset[i - 1]->end)
      return Bad(path, absl::StrCat("tensors '", byOffset[i - 1]->name,
                                    "' [", byOffset[i - 1]->begin, ", ",
                                    byOffset[i - 1]->end, ") and '",
                                    byOffset[i]->name, "' [",
                                    byOffset[i]->begin, ", ", byOffset[i]->end,
                                    ") overlap"));
  f.file_ = std::move(file);
  return f;
}

std::vector<std::string> SafetensorsFile::names() const {
  std::vector<std::string> out;
  out.reserve(entries_.size());
  for (const auto &[name, _] : entries_)
    out.push_back(name);
  return out;
}

const SafetensorsEntry *SafetensorsFile::Find(const std::string &name) const {
  auto it = entries_.find(name);
  return it == entries_.end() ? nullptr : &it->second;
}

absl::StatusOr<Tensor> SafetensorsFile::Get(const std::string &name) const {
  const SafetensorsEntry *e = Find(name);
  if (e == nullptr)
    return absl::NotFoundError(
        absl::StrCat(path_, ": no tensor '", name, "'"));
  const char *p = file_->data() + data_start_ + e->begin;
  const size_t align = DTypeSize(e->dtype);
  if (reinterpret_cast<uintptr_t>(p) % align == 0)
    return Tensor::Borrow(e->dtype, e->shape, const_cast<char *>(p), file_);
  BT_ASSIGN_OR_RETURN(Tensor t, Tensor::Allocate(e->dtype, e->shape));
  if (t.nbytes() > 0)
    std::memcpy(t.data(), p, t.nbytes());
  return t;
}

absl::StatusOr<std::string>
SerializeSafetensors(const std::vector<NamedTensorRef> &tensors,
                     const std::map<std::string, std::string> &metadata) {
  std::vector<NamedTensorRef> sorted = tensors;
  std::sort(sorted.begin(), sorted.end(),
            [](const NamedTensorRef &a, const NamedTensorRef &b) {
              return a.first < b.first;
            });
  ordered_json header = ordered_json::object();
  if (!metadata.empty()) {
    ordered_json m = ordered_json::object();
    for (const auto &[k, v] : metadata)
      m[k] = v;
    header["__metadata__"] = std::move(m);
  }
  uint64_t offset = 0;
  for (size_t i = 0; i < sorted.size(); ++i) {
    const auto &[name, t] = sorted[i];
    if (name.empty())
      return absl::InvalidArgumentError("safetensors: empty tensor name");
    if (name == "__metadata__")
      return absl::InvalidArgumentError(
          "safetensors: '__metadata__' is reserved and cannot name a tensor");
    if (i > 0 && sorted[i - 1].first == name)
      return absl::InvalidArgumentError(
          absl::StrCat("safetensors: duplicate tensor name '", name, "'"));
    if (t == nullptr || !t->valid() || DTypeSize(t->dtype()) == 0)
      return absl::InvalidArgumentError(absl::StrCat(
          "safetensors: tensor '", name, "' is empty or has no dtype"));
    auto numel = NumElements(t->shape(), DTypeSize(t->dtype()));
    if (!numel.ok())
      return absl::InvalidArgumentError(absl::StrCat(
          "safetensors: tensor '", name, "': ", numel.status().message()));
    if (t->nbytes() > 0 && t->data() == nullptr)
      return absl::InvalidArgumentError(
          absl::StrCat("safetensors: tensor '", name, "' has no data"));
    ordered_json e = ordered_json::object();
    e["dtype"] = DTypeName(t->dtype());
    e["shape"] = t->shape();
    e["data_offsets"] = {offset, offset + t->nbytes()};
    header[name] = std::move(e);
    offset += t->nbytes();
  }
  std::string h = header.dump();
  h.append((8 - h.size() % 8) % 8, ' ');
  std::string out;
  out.reserve(8 + h.size() + offset);
  uint64_t n = h.size();
  for (int i = 0; i < 8; ++i)
    out.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  out += h;
  for (const auto &[name, t] : sorted)
    out.append(static_cast<const char *>(t->data()), t->nbytes());
  return out;
}

absl::Status WriteSafetensors(const std::string &path,
                              const std::vector<NamedTensorRef> &tensors,
                              const std::map<std::string, std::string> &metadata) {
  auto bytes = SerializeSafetensors(tensors, metadata);
  if (!bytes.ok())
    return absl::Status(bytes.status().code(),
                        absl::StrCat(path, ": ", bytes.status().message()));
  return WriteFileAtomically(path, *bytes);
}

absl::Status WriteSafetensors(const std::string &path,
                              const std::map<std::string, Tensor> &tensors,
                              const std::map<std::string, std::string> &metadata) {
  std::vector<NamedTensorRef> refs;
  for (const auto &[name, t] : tensors)
    refs.emplace_back(name, &t);
  return WriteSafetensors(path, refs, metadata);
}

} // namespace bt::rt
