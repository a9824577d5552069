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
#include <iostream>
#include <mutex>
#include <new>
#include <streambuf>
#include <string>
#include <vector>

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

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

// A streambuf that collects what libsentencepiece logs (its LOG(INFO) lines
// go to std::cerr; training writes hundreds of them). Thread-safe: the
// trainer's worker threads may log too.
class CaptureBuf : public std::streambuf {
public:
  std::string Take() {
    std::lock_guard<std::mutex> lock(mu_);
    std::string s;
    s.swap(text_);
    return s;
  }

protected:
  int_type overflow(int_type c) override {
    if (c != traits_type::eof()) {
      std::lock_guard<std::mutex> lock(mu_);
      text_.push_back(static_cast<char>(c));
    }
    return traits_type::not_eof(c);
  }
  std::streamsize xsputn(const char *s, std::streamsize n) override {
    std::lock_guard<std::mutex> lock(mu_);
    text_.append(s, static_cast<size_t>(n));
    return n;
  }

private:
  std::mutex mu_;
  std::string text_;
};

CaptureBuf &Capture() {
  static CaptureBuf *buf = new CaptureBuf;
  return *buf;
}

// The shim is loaded with RTLD_DEEPBIND (tokenizer.cc), so libsentencepiece
// binds `std::cerr` to libstdc++'s own definition. An executable that uses
// std::cerr and links libstdc++ dynamically has a copy-relocated std::cerr:
// libstdc++ constructs that copy, and its own definition stays zeroed (no
// vtable), which libsentencepiece's first log line would crash on. Construct
// the stream in place when that is the case (it then only ever writes to
// Capture()); otherwise it is the process's std::cerr, which the trainer
// redirects for the duration of a call.
void EnsureCerr() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (*reinterpret_cast<void *const *>(&std::cerr) == nullptr)
      new (&std::cerr) std::ostream(&Capture());
  });
}

// Redirects std::cerr to Capture() while alive.
class CerrCapture {
public:
  CerrCapture() {
    EnsureCerr();
    (void)Capture().Take();
    old_ = std::cerr.rdbuf(&Capture());
  }
  ~CerrCapture() { std::cerr.rdbuf(old_); }
  // The last `max` bytes of the log so far.
  std::string Tail(size_t max) {
    std::string s = Capture().Take();
    return s.size() > max ? s.substr(s.size() - max) : s;
  }

private:
  std::streambuf *old_;
};

} // namespace

extern "C" {

__attribute__((visibility("default"))) int32_t bt_spm_abi_version(void) {
  return 1;
}

__attribute__((visibility("default"))) void *
bt_spm_load(const char *data, size_t size, char **error) {
  try {
    EnsureCerr(); // libsentencepiece may log (LOG(ERROR)) from here on
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

__attribute__((visibility("default"))) int64_t bt_spm_eos_id(void *h) {
  return static_cast<sentencepiece::SentencePieceProcessor *>(h)->eos_id();
}

__attribute__((visibility("default"))) int64_t bt_spm_unk_id(void *h) {
  return static_cast<sentencepiece::SentencePieceProcessor *>(h)->unk_id();
}

// Trains a model (SentencePieceTrainer::Train with spm_train-style `args`)
// on `count` sentences given as (pointer, size) pairs; the serialized
// ModelProto is returned in a malloc'ed buffer. The trainer's log (std::cerr)
// is captured and dropped; on failure its tail is part of the error.
__attribute__((visibility("default"))) int
bt_spm_train(const char *args, const char *const *sentences,
             const size_t *sizes, size_t count, char **model,
             size_t *model_size, char **error) {
  class Iterator : public sentencepiece::SentenceIterator {
  public:
    Iterator(const char *const *s, const size_t *n, size_t count)
        : s_(s), n_(n), count_(count) { Load(); }
    bool done() const override { return i_ >= count_; }
    void Next() override { ++i_; Load(); }
    const std::string &value() const override { return value_; }
    sentencepiece::util::Status status() const override {
      return sentencepiece::util::Status();
    }

  private:
    void Load() {
      if (i_ < count_)
        value_.assign(s_[i_], n_[i_]);
    }
    const char *const *s_;
    const size_t *n_;
    size_t count_, i_ = 0;
    std::string value_;
  };
  try {
    CerrCapture log;
    // spm_train's --random_seed is not a TrainerSpec field: take it out of
    // the arguments and seed the library's generator (as spm_train does).
    std::string spec_args;
    for (size_t pos = 0; args[pos] != '\0';) {
      const char *start = args + pos;
      size_t len = std::strcspn(start, " ");
      std::string word(start, len);
      pos += len;
      while (args[pos] == ' ')
        ++pos;
      if (word.rfind("--random_seed=", 0) == 0) {
        sentencepiece::SetRandomGeneratorSeed(static_cast<unsigned int>(
            std::strtoul(word.c_str() + 14, nullptr, 10)));
        continue;
      }
      if (!word.empty())
        spec_args += (spec_args.empty() ? "" : " ") + word;
    }
    Iterator it(sentences, sizes, count);
    std::string proto;
    auto status = sentencepiece::SentencePieceTrainer::Train(
        absl::string_view(spec_args), &it, &proto);
    if (!status.ok()) {
      SetError(error, status.ToString());
      return 1;
    }
    if (proto.empty()) {
      SetError(error, "the trainer returned no model; its log ends with: " +
                          log.Tail(2000));
      return 1;
    }
    *model = static_cast<char *>(std::malloc(proto.size() + 1));
    std::memcpy(*model, proto.data(), proto.size());
    *model_size = proto.size();
    return 0;
  } catch (const std::exception &e) {
    SetError(error, e.what());
  } catch (...) {
    SetError(error, "unknown exception in libsentencepiece_train");
  }
  return 1;
}

__attribute__((visibility("default"))) void bt_spm_free(void *p) {
  std::free(p);
}

} // extern "C"
