//===- config_internal.h - shared by the config readers ---------*- C++ -*-===//
//
// Private to runtime/model: what the three config readers (config.cc, the
// official YAML in config_yaml.cc, the JSON forms in config_json.cc) share —
// field labels for located errors, the validation of a resolved config and
// the derived stack fields. Not installed, not included outside model/.
//
//===----------------------------------------------------------------------===//
#ifndef BT_RUNTIME_MODEL_CONFIG_INTERNAL_H
#define BT_RUNTIME_MODEL_CONFIG_INTERNAL_H

#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "bt/proto/bt.pb.h"

namespace bt::rt::config_internal {

//===----------------------------------------------------------------------===//
// Field labels: how a ModelConfig field is spelled in its source file.
//===----------------------------------------------------------------------===//

struct Label {
  std::string path; // e.g. "block_decoder.config.hidden_size"
  std::string note; // e.g. "inherited from ..." (may be empty)
};

// Keyed by proto path: "block_length", "block_decoder.hidden_size", ...
class Labels {
public:
  void Set(const std::string &key, std::string path, std::string note = "") {
    m_[key] = Label{std::move(path), std::move(note)};
  }
  // "<path> (<value>)" or "<path> (<value>, <note>)".
  template <typename T> std::string Fmt(const std::string &key, T value) const {
    auto it = m_.find(key);
    std::string path = it == m_.end() ? key : it->second.path;
    std::string v = FormatValue(value);
    if (it != m_.end() && !it->second.note.empty())
      return absl::StrCat(path, " (", v, ", ", it->second.note, ")");
    return absl::StrCat(path, " (", v, ")");
  }
  bool Has(const std::string &key) const { return m_.contains(key); }
  void Copy(const std::string &from, const std::string &to) {
    auto it = m_.find(from);
    if (it != m_.end()) {
      Label l = it->second;
      m_[to] = std::move(l);
    }
  }
  std::string Path(const std::string &key) const {
    auto it = m_.find(key);
    return it == m_.end() ? key : it->second.path;
  }

private:
  static std::string FormatValue(int64_t v) { return absl::StrCat(v); }
  static std::string FormatValue(double v) { return absl::StrFormat("%g", v); }
  static std::string FormatValue(const std::string &v) {
    return absl::StrCat("'", v, "'");
  }
  absl::flat_hash_map<std::string, Label> m_;
};

inline absl::Status Invalid(absl::string_view where, absl::string_view msg) {
  return absl::InvalidArgumentError(absl::StrCat(where, ": ", msg));
}
inline absl::Status Unsupported(absl::string_view where, absl::string_view msg) {
  return absl::UnimplementedError(absl::StrCat(where, ": ", msg));
}

/// Validates a resolved config; errors name fields as `L` spells them
/// (ValidateModelConfig with the labels of the source file).
absl::Status ValidateWithLabels(const proto::ModelConfig &c,
                                absl::string_view where, const Labels &L);

/// Sets the derived stack fields head_dim and rotary_dims.
/// int(head_dim * rotary_pct) (HF GPTNeoXAttention's rotary_ndims) for
/// head_dim >= 0: 0 where rotary_pct is NaN or outside [0, 1] (validation
/// names the field) or the product does not fit an int64.
int64_t RotaryDims(int64_t head_dim, double rotary_pct);
void FillDerived(proto::NeoXConfig &s);

/// The name of the directory holding `path` (the model's default name; the
/// working directory's name for a bare file name).
std::string ParentDirName(const std::string &path);

} // namespace bt::rt::config_internal

#endif // BT_RUNTIME_MODEL_CONFIG_INTERNAL_H
