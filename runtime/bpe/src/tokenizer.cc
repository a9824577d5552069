//===- tokenizer.cc - byte-level BPE tokenizers (tokenizer.json) -----------===//

#include "bt/bpe/tokenizer.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "added_vocabulary.h"
#include "bpe_model.h"
#include "bt/bpe/utf8.h"
#include "unicode.h"

namespace bt::bpe {

using internal::AddedTokenMatcher;
using internal::BpeModel;
using internal::Regex;
using internal::Split;
using json = nlohmann::json;

class Tokenizer::Impl {
public:
  absl::Status EncodeText(absl::string_view text, std::vector<int32_t> &out) const;
  absl::Status EncodeNormalized(absl::string_view text, std::vector<int32_t> &out) const;
  absl::Status PreTokenizeAndEncode(absl::string_view text, std::vector<int32_t> &out) const;

  std::vector<AddedToken> added;
  absl::flat_hash_map<std::string, int32_t> vocab;      ///< model.vocab
  absl::flat_hash_map<std::string, int32_t> added_ids;  ///< added token content -> id
  std::vector<std::string> tokens;                      ///< id -> token string
  std::vector<std::string> decoded;                     ///< id -> ByteLevel decoder bytes
  std::vector<uint8_t> present, special;                ///< per id
  bool nfc = false;
  bool add_prefix_space = false;
  bool use_regex = true;
  std::optional<Regex> split_regex; ///< the GPT-2 pre-tokenizer regex
  std::optional<Regex> word_regex;  ///< one \w character (single_word tokens)
  AddedTokenMatcher raw_matcher, normalized_matcher;
  std::unique_ptr<BpeModel> model;
};

namespace {

// ------------------------------------------------------------------------
// tokenizer.json reading: typed fields with errors that name them.

class Reader {
public:
  explicit Reader(absl::string_view source) : source_(source) {}

  absl::Status Error(const std::string &path, absl::string_view message) const {
    return absl::InvalidArgumentError(absl::StrCat(source_, ": ", path, ": ", message));
  }
  absl::Status Unsupported(const std::string &path, absl::string_view value,
                           absl::string_view supported) const {
    return Error(path, absl::StrCat("'", value, "' is not supported (supported: ",
                                    supported, ")"));
  }

  static const json *Find(const json &obj, const char *key) {
    auto it = obj.find(key);
    return it == obj.end() ? nullptr : &*it;
  }
  /// obj[key] as a bool; absent or null -> `fallback` unless required.
  absl::StatusOr<bool> Bool(const json &obj, const std::string &path, const char *key,
                            std::optional<bool> fallback) const {
    const json *v = Find(obj, key);
    if (v == nullptr || v->is_null()) {
      if (fallback)
        return *fallback;
      return Error(Join(path, key), "missing (a boolean is required)");
    }
    if (!v->is_boolean())
      return Error(Join(path, key), absl::StrCat("expected a boolean, got ", v->type_name()));
    return v->get<bool>();
  }
  /// obj[key] as a string; absent or null -> nullopt.
  absl::StatusOr<std::optional<std::string>> OptString(const json &obj, const std::string &path,
                                                       const char *key) const {
    const json *v = Find(obj, key);
    if (v == nullptr || v->is_null())
      return std::optional<std::string>();
    if (!v->is_string())
      return Error(Join(path, key), absl::StrCat("expected a string, got ", v->type_name()));
    return std::optional<std::string>(v->get<std::string>());
  }
  /// A token id: a non-negative integer below 2^24.
  absl::StatusOr<int32_t> Id(const json &v, const std::string &path) const {
    if (!v.is_number_integer())
      return Error(path, absl::StrCat("expected a token id (an integer), got ", v.dump()));
    const int64_t id = v.get<int64_t>();
    if (id < 0 || id >= kMaxId)
      return Error(path, absl::StrCat("token id ", id, " is out of range [0, ", kMaxId, ")"));
    return static_cast<int32_t>(id);
  }
  /// The "type" of a component object.
  absl::StatusOr<std::string> Type(const json &v, const std::string &path) const {
    if (!v.is_object())
      return Error(path, absl::StrCat("expected an object or null, got ", v.type_name()));
    const json *t = Find(v, "type");
    if (t == nullptr || !t->is_string())
      return Error(path + ".type", "missing (a string naming the component)");
    return t->get<std::string>();
  }
  /// The elements of a Sequence component (`key`: "normalizers", ...).
  absl::StatusOr<const json *> Elements(const json &v, const std::string &path,
                                        const char *key) const {
    const json *e = Find(v, key);
    if (e == nullptr || !e->is_array())
      return Error(Join(path, key), "missing (an array is required for a Sequence)");
    return e;
  }

  static std::string Join(const std::string &path, const char *key) {
    return path.empty() ? key : absl::StrCat(path, ".", key);
  }
  static std::string Index(const std::string &path, size_t i) {
    return absl::StrCat(path, "[", i, "]");
  }

  static constexpr int64_t kMaxId = int64_t{1} << 24;

private:
  std::string source_;
};

std::string Quoted(absl::string_view s) {
  return json(std::string(s)).dump(-1, ' ', false, json::error_handler_t::replace);
}

/// normalizer: null, NFC, or a Sequence of those.
absl::Status ReadNormalizer(const Reader &r, const json &v, const std::string &path,
                            bool &nfc) {
  if (v.is_null())
    return absl::OkStatus();
  absl::StatusOr<std::string> type = r.Type(v, path);
  if (!type.ok())
    return type.status();
  if (*type == "NFC") {
    nfc = true;
    return absl::OkStatus();
  }
  if (*type == "Sequence") {
    absl::StatusOr<const json *> e = r.Elements(v, path, "normalizers");
    if (!e.ok())
      return e.status();
    for (size_t i = 0; i < (*e)->size(); ++i)
      if (absl::Status s = ReadNormalizer(r, (**e)[i], Reader::Index(path + ".normalizers", i), nfc);
          !s.ok())
        return s;
    return absl::OkStatus();
  }
  return r.Unsupported(path + ".type", *type, "NFC, or a Sequence of NFC");
}

/// A ByteLevel component (pre-tokenizer or decoder) or a Sequence of exactly
/// one, and its path. `key`: the Sequence's element array.
struct Located {
  const json *value;
  std::string path;
};
absl::StatusOr<Located> SingleByteLevel(const Reader &r, const json &v, const std::string &path,
                                        const char *key, const char *what) {
  if (v.is_null())
    return r.Error(path, absl::StrCat("null is not supported: a byte-level BPE needs the ",
                                      "ByteLevel ", what));
  absl::StatusOr<std::string> type = r.Type(v, path);
  if (!type.ok())
    return type.status();
  if (*type == "ByteLevel")
    return Located{&v, path};
  if (*type == "Sequence") {
    absl::StatusOr<const json *> e = r.Elements(v, path, key);
    if (!e.ok())
      return e.status();
    if ((*e)->size() != 1)
      return r.Error(Reader::Join(path, key),
                     absl::StrCat("a Sequence of ", (*e)->size(),
                                  " components is not supported (supported: one ByteLevel)"));
    return SingleByteLevel(r, (**e)[0], Reader::Index(Reader::Join(path, key), 0), key, what);
  }
  return r.Unsupported(path + ".type", *type,
                       absl::StrCat("ByteLevel, or a Sequence of one ByteLevel"));
}

absl::Status ReadAddedTokens(const Reader &r, const json &root, Tokenizer::Impl &t) {
  const json *v = Reader::Find(root, "added_tokens");
  if (v == nullptr || v->is_null())
    return absl::OkStatus();
  if (!v->is_array())
    return r.Error("added_tokens", absl::StrCat("expected an array, got ", v->type_name()));
  for (size_t i = 0; i < v->size(); ++i) {
    const std::string path = Reader::Index("added_tokens", i);
    const json &e = (*v)[i];
    if (!e.is_object())
      return r.Error(path, absl::StrCat("expected an object, got ", e.type_name()));
    AddedToken a;
    const json *id = Reader::Find(e, "id");
    if (id == nullptr)
      return r.Error(path + ".id", "missing");
    absl::StatusOr<int32_t> idv = r.Id(*id, path + ".id");
    if (!idv.ok())
      return idv.status();
    a.id = *idv;
    absl::StatusOr<std::optional<std::string>> content = r.OptString(e, path, "content");
    if (!content.ok())
      return content.status();
    if (!content->has_value() || (*content)->empty())
      return r.Error(path + ".content", "missing or empty");
    a.content = std::move(**content);
    if (FindInvalidUtf8(a.content) != absl::string_view::npos)
      return r.Error(path + ".content", "is not valid UTF-8");
    struct {
      const char *key;
      bool *field;
    } flags[] = {{"single_word", &a.single_word}, {"lstrip", &a.lstrip},
                 {"rstrip", &a.rstrip},           {"normalized", &a.normalized},
                 {"special", &a.special}};
    for (auto &f : flags) {
      absl::StatusOr<bool> b = r.Bool(e, path, f.key, std::nullopt);
      if (!b.ok())
        return b.status();
      *f.field = *b;
    }
    if (auto [it, inserted] = t.added_ids.emplace(a.content, a.id); !inserted)
      return r.Error(path + ".content",
                     absl::StrCat(Quoted(a.content), " is already an added token"));
    if (auto it = t.vocab.find(a.content); it != t.vocab.end() && it->second != a.id)
      return r.Error(path + ".id", absl::StrCat(a.id, " disagrees with model.vocab, where ",
                                                 Quoted(a.content), " is ", it->second));
    t.added.push_back(std::move(a));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<BpeModel>> ReadModel(const Reader &r, const json &root,
                                                    Tokenizer::Impl &t) {
  const json *m = Reader::Find(root, "model");
  if (m == nullptr || m->is_null())
    return r.Error("model", "missing");
  absl::StatusOr<std::string> type = r.Type(*m, "model");
  if (!type.ok())
    return type.status();
  if (*type != "BPE")
    return r.Unsupported("model.type", *type, "BPE");

  if (const json *d = Reader::Find(*m, "dropout"); d != nullptr && !d->is_null()) {
    if (!d->is_number() || d->get<double>() != 0.0)
      return r.Error("model.dropout", absl::StrCat("BPE dropout (", d->dump(),
                                                   ") is not supported (supported: null or 0)"));
  }
  for (const char *key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    absl::StatusOr<std::optional<std::string>> s = r.OptString(*m, "model", key);
    if (!s.ok())
      return s.status();
    if (s->has_value() && !(*s)->empty())
      return r.Error(Reader::Join("model", key),
                     absl::StrCat(Quoted(**s), " is not supported (supported: null or \"\")"));
  }

  const json *vocab = Reader::Find(*m, "vocab");
  if (vocab == nullptr || !vocab->is_object())
    return r.Error("model.vocab", "missing (an object mapping token strings to ids)");
  t.vocab.reserve(vocab->size());
  absl::flat_hash_map<int32_t, const std::string *> by_id;
  by_id.reserve(vocab->size());
  for (auto it = vocab->begin(); it != vocab->end(); ++it) {
    const std::string path = absl::StrCat("model.vocab[", Quoted(it.key()), "]");
    absl::StatusOr<int32_t> id = r.Id(it.value(), path);
    if (!id.ok())
      return id.status();
    auto [pos, inserted] = t.vocab.emplace(it.key(), *id);
    if (auto [other, fresh] = by_id.emplace(*id, &pos->first); !fresh)
      return r.Error(path, absl::StrCat("id ", *id, " is also the id of ", Quoted(*other->second)));
  }

  BpeModel::Options options;
  absl::StatusOr<std::optional<std::string>> unk = r.OptString(*m, "model", "unk_token");
  if (!unk.ok())
    return unk.status();
  if (unk->has_value()) {
    auto it = t.vocab.find(**unk);
    if (it == t.vocab.end())
      return r.Error("model.unk_token", absl::StrCat(Quoted(**unk), " is not in model.vocab"));
    options.unk_id = it->second;
  }
  for (auto [key, field] : {std::pair<const char *, bool *>{"fuse_unk", &options.fuse_unk},
                            {"byte_fallback", &options.byte_fallback},
                            {"ignore_merges", &options.ignore_merges}}) {
    absl::StatusOr<bool> b = r.Bool(*m, "model", key, false);
    if (!b.ok())
      return b.status();
    *field = *b;
  }

  const json *merges = Reader::Find(*m, "merges");
  if (merges == nullptr || !merges->is_array())
    return r.Error("model.merges", "missing (an array of \"left right\" strings or [left, right] pairs)");
  std::vector<BpeModel::MergeIds> ids;
  ids.reserve(merges->size());
  std::string left, right;
  for (size_t i = 0; i < merges->size(); ++i) {
    const std::string path = Reader::Index("model.merges", i);
    const json &e = (*merges)[i];
    if (e.is_string()) {
      // Split at the first space (Rust: splitn(2, ' ')).
      const std::string &s = e.get_ref<const std::string &>();
      const size_t sp = s.find(' ');
      if (sp == std::string::npos)
        return r.Error(path, absl::StrCat(Quoted(s), " is not of the form \"left right\""));
      left = s.substr(0, sp);
      right = s.substr(sp + 1);
    } else if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string()) {
      left = e[0].get<std::string>();
      right = e[1].get<std::string>();
    } else {
      return r.Error(path, absl::StrCat("expected \"left right\" or [left, right], got ", e.dump()));
    }
    BpeModel::MergeIds mi{};
    for (auto [part, id] : {std::pair<const std::string *, int32_t *>{&left, &mi.left},
                            {&right, &mi.right}}) {
      auto it = t.vocab.find(*part);
      if (it == t.vocab.end())
        return r.Error(path, absl::StrCat(Quoted(*part), " is not in model.vocab"));
      *id = it->second;
    }
    auto it = t.vocab.find(left + right);
    if (it == t.vocab.end())
      return r.Error(path, absl::StrCat("the merged token ", Quoted(left + right),
                                        " is not in model.vocab"));
    mi.merged = it->second;
    ids.push_back(mi);
  }
  return std::make_unique<BpeModel>(t.vocab, ids, options);
}

} // namespace

// --------------------------------------------------------------------------

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromJson(absl::string_view text,
                                                               absl::string_view source) {
  const Reader r(source);
  json root;
  try {
    root = json::parse(text.begin(), text.end());
  } catch (const json::parse_error &e) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": not valid JSON at byte ", e.byte, ": ", e.what()));
  } catch (const json::exception &e) {
    // E.g. out_of_range 406: a number literal beyond double's range.
    return absl::InvalidArgumentError(absl::StrCat(source, ": not valid JSON: ", e.what()));
  }
  if (!root.is_object())
    return r.Error("(top level)", absl::StrCat("expected an object, got ", root.type_name()));

  auto impl = std::make_unique<Impl>();
  Impl &t = *impl;

  for (const char *key : {"truncation", "padding"})
    if (const json *v = Reader::Find(root, key); v != nullptr && !v->is_null())
      return r.Error(key, "is not supported (supported: null); encode whole texts and cut or "
                          "pad the ids instead");

  absl::StatusOr<std::unique_ptr<BpeModel>> model = ReadModel(r, root, t);
  if (!model.ok())
    return model.status();
  t.model = std::move(*model);
  if (absl::Status s = ReadAddedTokens(r, root, t); !s.ok())
    return s;

  static const json kNull;
  auto component = [&](const char *key) -> const json & {
    const json *v = Reader::Find(root, key);
    return v == nullptr ? kNull : *v;
  };
  if (absl::Status s = ReadNormalizer(r, component("normalizer"), "normalizer", t.nfc); !s.ok())
    return s;

  absl::StatusOr<Located> pre = SingleByteLevel(r, component("pre_tokenizer"), "pre_tokenizer",
                                                "pretokenizers", "pre-tokenizer");
  if (!pre.ok())
    return pre.status();
  {
    // add_prefix_space has no default in the Rust library (JavaScript's is
    // false): required. use_regex defaults to true in both.
    absl::StatusOr<bool> aps = r.Bool(*pre->value, pre->path, "add_prefix_space", std::nullopt);
    if (!aps.ok())
      return aps.status();
    t.add_prefix_space = *aps;
    absl::StatusOr<bool> regex = r.Bool(*pre->value, pre->path, "use_regex", true);
    if (!regex.ok())
      return regex.status();
    t.use_regex = *regex;
    if (absl::StatusOr<bool> trim = r.Bool(*pre->value, pre->path, "trim_offsets", false);
        !trim.ok())
      return trim.status(); // offsets only; checked for its type
  }
  if (absl::StatusOr<Located> dec =
          SingleByteLevel(r, component("decoder"), "decoder", "decoders", "decoder");
      !dec.ok())
    return dec.status();
  if (const json &pp = component("post_processor"); !pp.is_null()) {
    absl::StatusOr<std::string> type = r.Type(pp, "post_processor");
    if (!type.ok())
      return type.status();
    if (*type != "ByteLevel")
      return r.Unsupported("post_processor.type", *type,
                           "null or ByteLevel; a post-processor that adds tokens such as "
                           "TemplateProcessing is not");
  }

  // Every byte of valid UTF-8 must be encodable.
  for (int b = 0; b < 256; ++b) {
    const bool in_utf8 = b < 0xC0 || (b >= 0xC2 && b <= 0xF4);
    if (in_utf8 && !t.model->CanEncodeByte(static_cast<uint8_t>(b))) {
      std::string c;
      internal::AppendUtf8(c, internal::ByteLevelChars()[b]);
      return r.Error("model.vocab",
                     absl::StrFormat("has no token for the byte-level character %s (U+%04X, "
                                     "byte 0x%02X), and neither model.unk_token nor "
                                     "model.byte_fallback covers it",
                                     Quoted(c), static_cast<uint32_t>(internal::ByteLevelChars()[b]), b));
    }
  }

  const std::string ws = internal::WhiteSpaceClassBody();
  absl::StatusOr<Regex> split = Regex::Compile(absl::StrCat(
      "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^", ws, "\\p{L}\\p{N}]+|[", ws,
      "]+(?![^", ws, "])|[", ws, "]+"));
  if (!split.ok())
    return split.status();
  t.split_regex = std::move(*split);

  // Ids, token strings and the decoder's bytes.
  int32_t size = 0;
  for (const auto &[token, id] : t.vocab)
    size = std::max(size, id + 1);
  for (const AddedToken &a : t.added)
    size = std::max(size, a.id + 1);
  t.tokens.resize(size);
  t.decoded.resize(size);
  t.present.assign(size, 0);
  t.special.assign(size, 0);
  auto set = [&](int32_t id, const std::string &token) {
    t.tokens[id] = token;
    std::optional<std::string> bytes = internal::ByteLevelToBytes(token);
    t.decoded[id] = bytes ? std::move(*bytes) : token;
    t.present[id] = 1;
  };
  for (const auto &[token, id] : t.vocab)
    set(id, token);
  bool any_single_word = false;
  for (size_t i = 0; i < t.added.size(); ++i) {
    const AddedToken &a = t.added[i];
    if (t.present[a.id] && t.tokens[a.id] != a.content)
      return r.Error(Reader::Index("added_tokens", i) + ".id",
                     absl::StrCat(a.id, " is model.vocab's ", Quoted(t.tokens[a.id]),
                                  ", not ", Quoted(a.content)));
    // A token matched on normalized text is that text: the Rust library's
    // id_to_token and decode give its normalized content.
    std::string matched = a.content;
    if (a.normalized && t.nfc) {
      absl::StatusOr<std::string> n = internal::Nfc(a.content);
      if (!n.ok())
        return n.status();
      matched = std::move(*n);
    }
    set(a.id, matched);
    t.special[a.id] = a.special ? 1 : 0;
    any_single_word |= a.single_word;
    (a.normalized ? t.normalized_matcher : t.raw_matcher).Add(matched, static_cast<int>(i));
  }
  if (any_single_word) {
    absl::StatusOr<Regex> w =
        Regex::Compile("[\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\p{Join_Control}]");
    if (!w.ok())
      return w.status();
    t.word_regex = std::move(*w);
  }
  return std::unique_ptr<Tokenizer>(new Tokenizer(std::move(impl)));
}

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    const int e = errno;
    const std::string message = absl::StrCat(path, ": cannot open: ", std::strerror(e));
    if (e == ENOENT)
      return absl::NotFoundError(message);
    if (e == EACCES)
      return absl::PermissionDeniedError(message);
    return absl::UnavailableError(message);
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad())
    return absl::DataLossError(absl::StrCat(path, ": read error"));
  return FromJson(ss.str(), path);
}

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::~Tokenizer() = default;

// --------------------------------------------------------------------------
// Encoding.

absl::Status Tokenizer::Impl::PreTokenizeAndEncode(absl::string_view text,
                                                   std::vector<int32_t> &out) const {
  std::string prefixed;
  if (add_prefix_space && text[0] != ' ') {
    prefixed.reserve(text.size() + 1);
    prefixed += ' ';
    prefixed.append(text.data(), text.size());
    text = prefixed;
  }
  if (!use_regex) {
    model->Encode(text, out);
    return absl::OkStatus();
  }
  // Split with SplitDelimiterBehavior::Isolated: matches and the text between
  // them are pieces.
  size_t last = 0;
  absl::Status s = split_regex->ForEachMatch(text, [&](size_t begin, size_t end) {
    if (begin > last)
      model->Encode(text.substr(last, begin - last), out);
    if (end > begin)
      model->Encode(text.substr(begin, end - begin), out);
    last = end;
  });
  if (!s.ok())
    return s;
  if (last < text.size())
    model->Encode(text.substr(last), out);
  return absl::OkStatus();
}

absl::Status Tokenizer::Impl::EncodeNormalized(absl::string_view text,
                                               std::vector<int32_t> &out) const {
  if (normalized_matcher.empty())
    return PreTokenizeAndEncode(text, out);
  std::vector<Split> splits;
  if (absl::Status s = normalized_matcher.FindMatches(text, added,
                                                      word_regex ? &*word_regex : nullptr, splits);
      !s.ok())
    return s;
  for (const Split &sp : splits) {
    if (sp.token >= 0) {
      out.push_back(added[sp.token].id);
    } else if (absl::Status s = PreTokenizeAndEncode(text.substr(sp.begin, sp.end - sp.begin), out);
               !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

absl::Status Tokenizer::Impl::EncodeText(absl::string_view text, std::vector<int32_t> &out) const {
  std::vector<Split> splits;
  if (raw_matcher.empty()) {
    splits.push_back({0, text.size(), -1});
  } else if (absl::Status s = raw_matcher.FindMatches(text, added,
                                                      word_regex ? &*word_regex : nullptr, splits);
             !s.ok()) {
    return s;
  }
  for (const Split &sp : splits) {
    if (sp.token >= 0) {
      out.push_back(added[sp.token].id);
      continue;
    }
    absl::string_view piece = text.substr(sp.begin, sp.end - sp.begin);
    if (piece.empty())
      continue;
    if (!nfc) {
      if (absl::Status s = EncodeNormalized(piece, out); !s.ok())
        return s;
      continue;
    }
    absl::StatusOr<std::string> normalized = internal::Nfc(piece);
    if (!normalized.ok())
      return normalized.status();
    if (!normalized->empty())
      if (absl::Status s = EncodeNormalized(*normalized, out); !s.ok())
        return s;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int32_t>> Tokenizer::Encode(absl::string_view text) const {
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 1);
  absl::Status s;
  if (FindInvalidUtf8(text) == absl::string_view::npos) {
    s = impl_->EncodeText(text, out);
  } else {
    const std::string valid = ReplaceInvalidUtf8(text);
    s = impl_->EncodeText(valid, out);
  }
  if (!s.ok())
    return s;
  return out;
}

// --------------------------------------------------------------------------
// Decoding and the vocabulary.

absl::StatusOr<std::string> Tokenizer::DecodeBytes(absl::Span<const int32_t> ids,
                                                   bool skip_special_tokens) const {
  const Impl &t = *impl_;
  std::string out;
  for (size_t i = 0; i < ids.size(); ++i) {
    const int32_t id = ids[i];
    if (id < 0 || id >= static_cast<int32_t>(t.present.size()) || !t.present[id])
      return absl::InvalidArgumentError(absl::StrCat(
          "token id ", id, " (position ", i, ") is not in the vocabulary (",
          t.present.size(), " ids)"));
    if (skip_special_tokens && t.special[id])
      continue;
    out += t.decoded[id];
  }
  return out;
}

absl::StatusOr<std::string> Tokenizer::Decode(absl::Span<const int32_t> ids,
                                              bool skip_special_tokens) const {
  absl::StatusOr<std::string> bytes = DecodeBytes(ids, skip_special_tokens);
  if (!bytes.ok())
    return bytes.status();
  return ReplaceInvalidUtf8(*bytes);
}

int32_t Tokenizer::vocab_size() const { return static_cast<int32_t>(impl_->present.size()); }

std::optional<int32_t> Tokenizer::TokenToId(absl::string_view token) const {
  if (auto it = impl_->added_ids.find(token); it != impl_->added_ids.end())
    return it->second;
  if (auto it = impl_->vocab.find(token); it != impl_->vocab.end())
    return it->second;
  return std::nullopt;
}

std::optional<absl::string_view> Tokenizer::IdToToken(int32_t id) const {
  if (id < 0 || id >= vocab_size() || !impl_->present[id])
    return std::nullopt;
  return absl::string_view(impl_->tokens[id]);
}

absl::Span<const AddedToken> Tokenizer::added_tokens() const { return impl_->added; }

} // namespace bt::bpe
