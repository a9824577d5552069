//===- command_flags.h - command flags as given -----------------*- C++ -*-===//
//
// The flags of a launcher command as the user gave them, before the runtime
// checks them (commands.h). Standard C++ only (no abseil, no protobuf), so
// that bt-run's runtime bridge (tools/bt-run/RuntimeBridge.h, compiled like
// LLVM) fills the same struct that bt-launcher's argv parser fills.
//
//===----------------------------------------------------------------------===//

#ifndef BT_RUNTIME_TOOLING_COMMAND_FLAGS_H
#define BT_RUNTIME_TOOLING_COMMAND_FLAGS_H

#include <optional>
#include <string>
#include <vector>

namespace bt::rt {

/// The flags of `generate` as given, before ResolveGenerateFlags checks
/// them: what bt-launcher's argv (ParseGenerateFlags) and an in-process
/// caller (bt-run) both fill. Numbers are kept as their text (nullopt: not
/// given) so that both report a bad value alike.
struct GenerateCommandFlags {
  std::string inputs_path;          // --inputs
  std::vector<std::string> prompts; // --prompt (repeatable)
  std::string output_path;          // -o / --output
  std::optional<std::string> max_new_tokens; // integer >= 0 (default 32)
  bool greedy = false;                        // --greedy
  std::optional<std::string> temperature;     // >= 0; 0 = greedy
  std::optional<std::string> top_k;           // integer >= 0
  std::optional<std::string> top_p;           // (0, 1]
  std::optional<std::string> seed;            // integer >= 0, needs sampling
  bool official_generate_positions = false;
  bool ignore_eos = false;
  bool no_step_logits = false; // --no-step-logits: -o writes no step_logits
};

} // namespace bt::rt

#endif // BT_RUNTIME_TOOLING_COMMAND_FLAGS_H
