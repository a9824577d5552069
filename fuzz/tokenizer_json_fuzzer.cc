//===- tokenizer_json_fuzzer.cc - libFuzzer target: tokenizer.json -------===//
//
// bt::bpe::Tokenizer::FromJson (the Hugging Face tokenizer.json loader of
// `compile --tokenizer`, `generate --prompt` and `train --tokenizer`: JSON,
// the model, pre-tokenizer, normalizer, decoder and added-token fields,
// merges against the vocabulary) on arbitrary bytes; on success, Encode of a
// few fixed texts (ASCII, multi-byte UTF-8, invalid UTF-8, the added tokens'
// contents) and Decode of the ids, and Decode of every id below vocab_size()
// (gaps must be errors, never reads out of range).
//
//===----------------------------------------------------------------------===//

#include "bt/bpe/tokenizer.h"

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const std::string json(reinterpret_cast<const char *>(data), size);
  auto tok = bt::bpe::Tokenizer::FromJson(json, "fuzz.json");
  if (!tok.ok())
    return 0;
  const bt::bpe::Tokenizer &t = **tok;
  std::vector<std::string> texts = {
      "Hello, world! 12345 don't", "  \t\n x", "na\xc3\xafve \xe2\x82\xac \xf0\x9f\x98\x80",
      std::string("\xff\xfe\x80 a\0b", 8)};
  for (const auto &added : t.added_tokens())
    texts.push_back("a" + added.content + "b");
  for (const std::string &text : texts) {
    auto ids = t.Encode(text);
    if (!ids.ok())
      continue;
    for (int32_t id : *ids)
      if (id < 0 || id >= t.vocab_size())
        std::abort(); // Encode promises ids in [0, vocab_size())
    (void)t.Decode(*ids);
  }
  const int32_t n = std::min<int32_t>(t.vocab_size(), 4096);
  for (int32_t id = 0; id < n; ++id)
    (void)t.DecodeBytes(std::vector<int32_t>{id});
  return 0;
}
