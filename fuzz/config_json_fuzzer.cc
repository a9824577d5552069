//===- config_json_fuzzer.cc - libFuzzer target: JSON / HF config importer ===//
//
// ParseConfigJson (bt's own config.json and Hugging Face GPT-NeoX
// config.json, told apart by model_type) and, on success,
// ValidateModelConfig and DescribeModelConfig of the result.
//
//===----------------------------------------------------------------------===//

#include "bt/runtime/model/config.h"

#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const std::string text(reinterpret_cast<const char *>(data), size);
  auto c = bt::rt::ParseConfigJson(text, "fuzz.json");
  if (c.ok() && bt::rt::ValidateModelConfig(*c, "fuzz.json").ok())
    (void)bt::rt::DescribeModelConfig(*c);
  return 0;
}
