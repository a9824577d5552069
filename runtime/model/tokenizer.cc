//===- tokenizer.cc - SentencePiece and tokenizer.json tokenizers ----------===//

#include "bt/runtime/model/tokenizer.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "bt/bpe/tokenizer.h"
#include "bt/runtime/base/shared_object.h"
#include "bt/runtime/model/artifact.h"

#ifdef BT_HAVE_SPM_SHIM
extern "C" {
extern const char bt_spm_shim_begin[] __attribute__((visibility("hidden")));
extern const char bt_spm_shim_end[] __attribute__((visibility("hidden")));
extern const char bt_spm_lib_begin[] __attribute__((visibility("hidden")));
extern const char bt_spm_lib_end[] __attribute__((visibility("hidden")));
extern const char bt_spm_train_lib_begin[] __attribute__((visibility("hidden")));
extern const char bt_spm_train_lib_end[] __attribute__((visibility("hidden")));
}
#endif

namespace bt::rt {
namespace {

/// The C interface of runtime/src/spm/spm_shim.cc.
struct ShimApi {
  void *(*load)(const char *, size_t, char **);
  void (*unload)(void *);
  int64_t (*vocab_size)(void *);
  int (*encode)(void *, const char *, size_t, int64_t **, size_t *, char **);
  int (*decode)(void *, const int64_t *, size_t, char **, size_t *, char **);
  int64_t (*eos_id)(void *);
  int64_t (*unk_id)(void *);
  int (*train)(const char *, const char *const *, const size_t *, size_t,
               char **, size_t *, char **);
  void (*free)(void *);
};

#if defined(__SANITIZE_ADDRESS__)
[[maybe_unused]] constexpr int kShimDeepBind = 0;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
[[maybe_unused]] constexpr int kShimDeepBind = 0;
#else
[[maybe_unused]] constexpr int kShimDeepBind = RTLD_DEEPBIND;
#endif
#else
[[maybe_unused]] constexpr int kShimDeepBind = RTLD_DEEPBIND;
#endif

/// Loads the embedded shim once per process (it stays loaded).
absl::StatusOr<const ShimApi *> Shim() {
#ifndef BT_HAVE_SPM_SHIM
  return absl::UnimplementedError(
      "this runtime was built without SentencePiece (libsentencepiece-dev), "
      "so it cannot tokenize text; pass token ids (--inputs) instead");
#else
  static std::once_flag once;
  static absl::StatusOr<const ShimApi *> api = absl::InternalError("unset");
  std::call_once(once, [] {
    // RTLD_DEEPBIND: libsentencepiece carries its own copy of protobuf-lite
    // whose symbols must not bind to a protobuf already in the process
    // (bt-run, the tests); the shim and its dependencies look up their own
    // symbols first. AddressSanitizer refuses RTLD_DEEPBIND (it would let
    // the library bypass its interceptors; google/sanitizers#611): the
    // sanitizer builds (scripts/sanitize.sh) link protobuf statically and
    // export none of its symbols (runtime/CMakeLists.txt), so the shim is
    // loaded there without it.
    //
    // First the embedded libsentencepiece.so.0 and libsentencepiece_train.so.0
    // (the files the shim was linked against): the dynamic linker then
    // satisfies the shim's DT_NEEDED entries with these objects, matched by
    // their SONAME, and never looks for the machine's own copies, which may
    // be missing or of another version whose C++ ABI differs from the
    // headers the shim was compiled with.
    auto load = [](const char *begin, const char *end, const char *name) {
      return LoadSharedObjectFromMemory(
          absl::string_view(begin, static_cast<size_t>(end - begin)), name,
          RTLD_NOW | RTLD_LOCAL | kShimDeepBind);
    };
    absl::StatusOr<LoadedSharedObject> so =
        load(bt_spm_lib_begin, bt_spm_lib_end, "the embedded libsentencepiece.so.0");
    if (so.ok())
      so = load(bt_spm_train_lib_begin, bt_spm_train_lib_end,
                "the embedded libsentencepiece_train.so.0");
    if (so.ok())
      so = load(bt_spm_shim_begin, bt_spm_shim_end, "the SentencePiece shim");
    if (!so.ok()) {
      api = absl::FailedPreconditionError(absl::StrCat(
          "tokenizing text needs SentencePiece, which cannot be loaded: ",
          so.status().message(), "; pass token ids (--inputs) instead"));
      return;
    }
    auto *a = new ShimApi;
    void *h = so->handle;
    a->load = reinterpret_cast<decltype(a->load)>(dlsym(h, "bt_spm_load"));
    a->unload = reinterpret_cast<decltype(a->unload)>(dlsym(h, "bt_spm_unload"));
    a->vocab_size =
        reinterpret_cast<decltype(a->vocab_size)>(dlsym(h, "bt_spm_vocab_size"));
    a->encode = reinterpret_cast<decltype(a->encode)>(dlsym(h, "bt_spm_encode"));
    a->decode = reinterpret_cast<decltype(a->decode)>(dlsym(h, "bt_spm_decode"));
    a->eos_id = reinterpret_cast<decltype(a->eos_id)>(dlsym(h, "bt_spm_eos_id"));
    a->unk_id = reinterpret_cast<decltype(a->unk_id)>(dlsym(h, "bt_spm_unk_id"));
    a->train = reinterpret_cast<decltype(a->train)>(dlsym(h, "bt_spm_train"));
    a->free = reinterpret_cast<decltype(a->free)>(dlsym(h, "bt_spm_free"));
    if (!a->load || !a->unload || !a->vocab_size || !a->encode || !a->decode ||
        !a->eos_id || !a->unk_id || !a->train || !a->free) {
      api = absl::InternalError("the SentencePiece shim lacks a symbol");
      return;
    }
    api = a; // the shim and its memfd stay loaded for the process
  });
  return api;
#endif
}

std::string TakeError(const ShimApi &api, char *e) {
  std::string s = e != nullptr ? e : "unknown error";
  api.free(e);
  return s;
}

} // namespace

proto::TokenizerKind DetectTokenizerKind(absl::string_view bytes) {
  absl::string_view s = absl::StripLeadingAsciiWhitespace(bytes);
  return !s.empty() && s[0] == '{' ? proto::TOKENIZER_HF_JSON : proto::TOKENIZER_SENTENCEPIECE;
}

const char *TokenizerKindName(proto::TokenizerKind kind) {
  return kind == proto::TOKENIZER_HF_JSON ? "tokenizer.json" : "SentencePiece";
}

const char *TokenizerFileName(proto::TokenizerKind kind) {
  return kind == proto::TOKENIZER_HF_JSON ? "tokenizer.json" : "tokenizer.model";
}

Tokenizer::Tokenizer() = default;

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::Load(proto::TokenizerKind kind,
                                                           absl::string_view bytes) {
  switch (kind) {
  case proto::TOKENIZER_SENTENCEPIECE:
    return LoadSentencePiece(bytes);
  case proto::TOKENIZER_HF_JSON:
    return LoadHfJson(bytes);
  default:
    return absl::InvalidArgumentError(absl::StrCat(
        "unknown tokenizer kind ", static_cast<int>(kind), " (made by a newer bt?)"));
  }
}

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromArtifact(const Artifact &artifact) {
  if (artifact.tokenizer().empty())
    return absl::FailedPreconditionError(absl::StrCat(
        artifact.path(),
        " has no tokenizer: compile it with `bt-run compile --tokenizer "
        "<spm.model|tokenizer.json>`, or pass token ids with --inputs"));
  return Load(artifact.manifest().tokenizer_kind(), artifact.tokenizer());
}

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::LoadHfJson(absl::string_view json) {
  absl::StatusOr<std::unique_ptr<bpe::Tokenizer>> b =
      bpe::Tokenizer::FromJson(json, "tokenizer.json");
  if (!b.ok())
    return b.status();
  std::unique_ptr<Tokenizer> t(new Tokenizer());
  t->vocab_size_ = (*b)->vocab_size();
  t->eos_id_ = (*b)->TokenToId("<|endoftext|>").value_or(-1);
  t->unk_id_ = -1;
  t->bpe_ = std::move(*b);
  return t;
}

absl::StatusOr<std::unique_ptr<Tokenizer>>
Tokenizer::LoadSentencePiece(absl::string_view model_proto) {
  absl::StatusOr<const ShimApi *> api = Shim();
  if (!api.ok())
    return api.status();
  if (model_proto.empty())
    return absl::InvalidArgumentError("the SentencePiece model is empty");
  char *error = nullptr;
  void *h = (*api)->load(model_proto.data(), model_proto.size(), &error);
  if (h == nullptr)
    return absl::InvalidArgumentError(absl::StrCat(
        "not a SentencePiece model: ", TakeError(**api, error)));
  std::unique_ptr<Tokenizer> t(new Tokenizer());
  t->handle_ = h;
  t->vocab_size_ = (*api)->vocab_size(h);
  t->eos_id_ = (*api)->eos_id(h);
  t->unk_id_ = (*api)->unk_id(h);
  return t;
}

Tokenizer::~Tokenizer() {
  if (handle_ != nullptr)
    (*Shim())->unload(handle_);
}

absl::StatusOr<std::vector<int64_t>>
Tokenizer::Encode(absl::string_view text) const {
  if (bpe_) {
    absl::StatusOr<std::vector<int32_t>> ids = bpe_->Encode(text);
    if (!ids.ok())
      return ids.status();
    return std::vector<int64_t>(ids->begin(), ids->end());
  }
  const ShimApi &api = **Shim();
  int64_t *ids = nullptr;
  size_t n = 0;
  char *error = nullptr;
  if (api.encode(handle_, text.data(), text.size(), &ids, &n, &error) != 0)
    return absl::InvalidArgumentError(
        absl::StrCat("cannot tokenize: ", TakeError(api, error)));
  std::vector<int64_t> v(ids, ids + n);
  api.free(ids);
  return v;
}

absl::StatusOr<std::string> Tokenizer::Decode(absl::Span<const int64_t> ids) const {
  if (bpe_) {
    std::vector<int32_t> valid;
    for (int64_t id : ids)
      if (id >= 0 && id < vocab_size_ && bpe_->IdToToken(static_cast<int32_t>(id)))
        valid.push_back(static_cast<int32_t>(id));
    return bpe_->Decode(valid);
  }
  const ShimApi &api = **Shim();
  std::vector<int64_t> valid;
  for (int64_t id : ids)
    if (id >= 0 && id < vocab_size_)
      valid.push_back(id);
  char *text = nullptr, *error = nullptr;
  size_t n = 0;
  if (api.decode(handle_, valid.data(), valid.size(), &text, &n, &error) != 0)
    return absl::InvalidArgumentError(
        absl::StrCat("cannot decode token ids: ", TakeError(api, error)));
  std::string s(text, n);
  api.free(text);
  return s;
}

// Declared in data.cc (TrainSentencePiece); here because this file owns the
// shim.
absl::StatusOr<std::string>
TrainSentencePieceWithShim(const std::string &args,
                           const std::vector<std::string> &sentences) {
  absl::StatusOr<const ShimApi *> api = Shim();
  if (!api.ok())
    return api.status();
  std::vector<const char *> ptrs;
  std::vector<size_t> sizes;
  ptrs.reserve(sentences.size());
  sizes.reserve(sentences.size());
  for (const std::string &s : sentences) {
    ptrs.push_back(s.data());
    sizes.push_back(s.size());
  }
  char *model = nullptr, *error = nullptr;
  size_t n = 0;
  if ((*api)->train(args.c_str(), ptrs.data(), sizes.data(), ptrs.size(),
                    &model, &n, &error) != 0)
    return absl::InvalidArgumentError(absl::StrCat(
        "SentencePiece training (", args, ") failed: ", TakeError(**api, error)));
  std::string proto(model, n);
  (*api)->free(model);
  return proto;
}

} // namespace bt::rt
