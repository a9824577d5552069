//===- spm_shim.cc - a C interface to libsentencepiece ---------------------===//
//
// Built as a small shared object that links libsentencepiece.so.0 and is
// embedded into btrt (tokenizer.cc loads it from memory with dlopen). Its
// interface is C (plain pointers and sizes), so nothing C++ crosses between
// the runtime and libsentencepiece: the static bt-launcher (with its own
// static libstdc++) can use the system's libsentencepiece (with the shared
// libstdc++) without a C++ ABI dependency between them. Errors are returned
// as malloc'ed messages; no exception leaves this file.
//
//===----------------------------------------------------------------------===//

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <sentencepiece_processor.h>

namespace {

char *Dup(const std::string &s) {
  char *p = static_cast<char *>(std::malloc(s.size() + 1));
  if (p != nullptr)
    std::memcpy(p, s.c_str(), s.size() + 1);
  return p;
}

void SetError(char **error, const std::string &message) {
  if (error != nullptr)
    *error = Dup(message);
}

} // namespace

extern "C" {

__attribute__((visibility("default"))) int32_t bt_spm_abi_version(void) {
  return 1;
}

__attribute__((visibility("default"))) void *
bt_spm_load(const char *data, size_t size, char **error) {
  try {
    auto *p = new sentencepiece::SentencePieceProcessor();
    auto status = p->LoadFromSerializedProto(
        absl::string_view(data, size));
    if (!status.ok()) {
      SetError(error, status.ToString());
      delete p;
      return nullptr;
    }
    return p;
  } catch (const std::exception &e) {
    SetError(error, e.what());
  } catch (...) {
    SetError(error, "unknown exception in libsentencepiece");
  }
  return nullptr;
}

__attribute__((visibility("default"))) void bt_spm_unload(void *h) {
  delete static_cast<sentencepiece::SentencePieceProcessor *>(h);
}

__attribute__((visibility("default"))) int64_t bt_spm_vocab_size(void *h) {
  return static_cast<sentencepiece::SentencePieceProcessor *>(h)->GetPieceSize();
}

__attribute__((visibility("default"))) int
bt_spm_encode(void *h, const char *text, size_t size, int64_t **ids,
              size_t *count, char **error) {
  try {
    std::vector<int> v;
    auto status = static_cast<sentencepiece::SentencePieceProcessor *>(h)->Encode(
        absl::string_view(text, size), &v);
    if (!status.ok()) {
      SetError(error, status.ToString());
      return 1;
    }
    *ids = static_cast<int64_t *>(std::malloc(sizeof(int64_t) * (v.size() + 1)));
    for (size_t i = 0; i < v.size(); ++i)
      (*ids)[i] = v[i];
    *count = v.size();
    return 0;
  } catch (const std::exception &e) {
    SetError(error, e.what());
  } catch (...) {
    SetError(error, "unknown exception in libsentencepiece");
  }
  return 1;
}

__attribute__((visibility("default"))) int
bt_spm_decode(void *h, const int64_t *ids, size_t count, char **text,
              size_t *size, char **error) {
  try {
    std::vector<int> v(ids, ids + count);
    std::string s;
    auto status =
        static_cast<sentencepiece::SentencePieceProcessor *>(h)->Decode(v, &s);
    if (!status.ok()) {
      SetError(error, status.ToString());
      return 1;
    }
    *text = Dup(s);
    *size = s.size();
    return 0;
  } catch (const std::exception &e) {
    SetError(error, e.what());
  } catch (...) {
    SetError(error, "unknown exception in libsentencepiece");
  }
  return 1;
}

__attribute__((visibility("default"))) void bt_spm_free(void *p) {
  std::free(p);
}

} // extern "C"
