//===- config_yaml_fuzzer.cc - libFuzzer target: YAML config importer ----===//
//
// ParseOfficialYamlConfig (the official training YAML: yaml-cpp parse,
// duplicate keys, field types, consistency) and, on success,
// ValidateModelConfig and DescribeModelConfig of the result.
//
//===----------------------------------------------------------------------===//

#include "bt/runtime/model/config.h"

#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const std::string text(reinterpret_cast<const char *>(data), size);
  auto c = bt::rt::ParseOfficialYamlConfig(text, "fuzz.yaml");
  if (c.ok() && bt::rt::ValidateModelConfig(*c, "fuzz.yaml").ok())
    (void)bt::rt::DescribeModelConfig(*c);
  return 0;
}
