//===- bt-bpe.cc - encode, decode and bench with a tokenizer.json ----------===//
//
//   bt-bpe encode TOKENIZER.json [FILE|-]   ids of the file's bytes, one a line
//   bt-bpe decode TOKENIZER.json [FILE|-]   text of whitespace-separated ids
//   bt-bpe bench TOKENIZER.json TEXT [--iters N] [--oracle DIR]
//       encoding speed on TEXT (tokens/s: first call, with the word cache
//       cold, and best of N); with --oracle, in the same run, the two oracles
//       of DIR/oracle.mjs (runtime/bpe/test/data, with its node_modules)
//
// Exit status: 0, 1 for errors (message on stderr), 2 for bad usage.
//
//===----------------------------------------------------------------------===//

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "bt/bpe/tokenizer.h"

namespace {

constexpr const char *kUsage =
    "usage: bt-bpe encode TOKENIZER.json [FILE|-]\n"
    "       bt-bpe decode TOKENIZER.json [FILE|-]\n"
    "       bt-bpe bench TOKENIZER.json TEXT [--iters N] [--oracle DIR]\n";

bool ReadAll(const std::string &path, std::string &out) {
  if (path == "-") {
    out.assign(std::istreambuf_iterator<char>(std::cin), {});
    return !std::cin.bad();
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::cerr << "bt-bpe: " << path << ": cannot open\n";
    return false;
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  out = ss.str();
  return true;
}

int Fail(const absl::Status &s) {
  std::cerr << "bt-bpe: " << s.message() << "\n";
  return 1;
}

double Seconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

int Bench(const bt::bpe::Tokenizer &tok, const std::string &tokenizer_path,
          const std::string &text_path, int iters, const std::string &oracle_dir) {
  std::string text;
  if (!ReadAll(text_path, text))
    return 1;
  double first = 0, best = 1e300;
  size_t count = 0;
  for (int i = 0; i < iters; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    absl::StatusOr<std::vector<int32_t>> ids = tok.Encode(text);
    const double s = Seconds(std::chrono::steady_clock::now() - t0);
    if (!ids.ok())
      return Fail(ids.status());
    count = ids->size();
    if (i == 0)
      first = s;
    best = std::min(best, s);
  }
  std::cout << absl::StrFormat("%s: %d bytes, %d iterations (best of them; first: cold word cache)\n",
                               text_path, text.size(), iters);
  std::cout << absl::StrFormat("%-36s %10s %12s %12s %14s\n", "encoder", "tokens",
                               "first s", "best s", "best tokens/s");
  auto row = [&](const std::string &name, size_t n, double f, double b) {
    std::cout << absl::StrFormat("%-36s %10d %12.3f %12.3f %14.0f\n", name, n, f, b, n / b);
  };
  row("bt::bpe (C++, 1 thread)", count, first, best);
  if (oracle_dir.empty())
    return 0;
  const std::string cmd = absl::StrCat("node '", oracle_dir, "/oracle.mjs' bench '",
                                       tokenizer_path, "' '", text_path, "' ", iters);
  FILE *p = popen(cmd.c_str(), "r");
  if (p == nullptr) {
    std::cerr << "bt-bpe: cannot run: " << cmd << "\n";
    return 1;
  }
  std::string out;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof(buf), p)) > 0;)
    out.append(buf, n);
  if (pclose(p) != 0) {
    std::cerr << "bt-bpe: the oracle failed: " << cmd << "\n";
    return 1;
  }
  nlohmann::json r = nlohmann::json::parse(out, nullptr, false);
  if (r.is_discarded() || !r.contains("js") || !r.contains("rust")) {
    std::cerr << "bt-bpe: unexpected oracle output: " << out << "\n";
    return 1;
  }
  int status = 0;
  for (auto [key, name] : {std::pair<const char *, const char *>{"js", "@huggingface/tokenizers (JS)"},
                           {"rust", "tokenizers (Rust, node binding)"}}) {
    const auto &o = r[key];
    const size_t n = o["tokens"].get<size_t>();
    const double b = o["best_seconds"].get<double>();
    row(name, n, o["first_seconds"].get<double>(), b);
    std::cout << absl::StrFormat("%-36s %s, bt::bpe %.1fx its speed\n", "",
                                 n == count ? "same token count" : "TOKEN COUNT DIFFERS",
                                 b / best);
    if (n != count)
      status = 1;
  }
  return status;
}

} // namespace

int main(int argc, char **argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.size() < 2) {
    std::cerr << kUsage;
    return 2;
  }
  const std::string &cmd = args[0];
  absl::StatusOr<std::unique_ptr<bt::bpe::Tokenizer>> tok =
      bt::bpe::Tokenizer::FromFile(args[1]);
  if (!tok.ok())
    return Fail(tok.status());

  if (cmd == "encode" || cmd == "decode") {
    if (args.size() > 3) {
      std::cerr << kUsage;
      return 2;
    }
    std::string input;
    if (!ReadAll(args.size() == 3 ? args[2] : "-", input))
      return 1;
    if (cmd == "encode") {
      absl::StatusOr<std::vector<int32_t>> ids = (*tok)->Encode(input);
      if (!ids.ok())
        return Fail(ids.status());
      std::string out;
      for (int32_t id : *ids)
        absl::StrAppend(&out, id, "\n");
      std::cout << out;
      return 0;
    }
    std::vector<int32_t> ids;
    for (absl::string_view w : absl::StrSplit(input, absl::ByAnyChar(" \t\r\n"), absl::SkipEmpty())) {
      int32_t id;
      if (!absl::SimpleAtoi(w, &id)) {
        std::cerr << "bt-bpe: '" << w << "' is not a token id\n";
        return 1;
      }
      ids.push_back(id);
    }
    absl::StatusOr<std::string> text = (*tok)->Decode(ids);
    if (!text.ok())
      return Fail(text.status());
    std::cout << *text;
    return 0;
  }
  if (cmd == "bench") {
    if (args.size() < 3) {
      std::cerr << kUsage;
      return 2;
    }
    int iters = 3;
    std::string oracle;
    for (size_t i = 3; i < args.size(); ++i) {
      if (args[i] == "--iters" && i + 1 < args.size() && absl::SimpleAtoi(args[i + 1], &iters) &&
          iters > 0) {
        ++i;
      } else if (args[i] == "--oracle" && i + 1 < args.size()) {
        oracle = args[++i];
      } else {
        std::cerr << "bt-bpe: bad argument '" << args[i] << "'\n" << kUsage;
        return 2;
      }
    }
    return Bench(**tok, args[1], args[2], iters, oracle);
  }
  std::cerr << "bt-bpe: unknown command '" << cmd << "'\n" << kUsage;
  return 2;
}
