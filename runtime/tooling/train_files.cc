//===- train_files.cc - files and directories of a training run -----------===//
//
// The helpers of train_internal.h (directories, checkpoint names, child
// processes, gnuplot plots) and PrepareTrainingModel (train.h).
//
//===----------------------------------------------------------------------===//

#include "bt/runtime/tooling/train.h"
#include "bt/runtime/tooling/train_internal.h"

#include <dirent.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "bt/runtime/tooling/bench.h"
#include "bt/runtime/tooling/child_process.h"
#include "bt/runtime/model/config.h"
#include "bt/runtime/base/file_util.h"
#include "bt/runtime/base/safetensors.h"
#include "bt/runtime/base/status_macros.h"
#include "bt/runtime/model/tokenizer.h"
#include "google/protobuf/util/json_util.h"
#include "nlohmann/json.hpp"

namespace bt::rt::train_internal {

std::string Num(double v) { return absl::StrFormat("%.17g", v); }


bool Exists(const std::string &path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

bool IsDir(const std::string &path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

absl::Status MakeDirs(const std::string &path) {
  std::string cur;
  for (absl::string_view part : absl::StrSplit(path, '/')) {
    cur = cur.empty() && path[0] == '/' ? absl::StrCat("/", part)
          : cur.empty()                  ? std::string(part)
                                         : absl::StrCat(cur, "/", part);
    if (part.empty() || IsDir(cur))
      continue;
    if (::mkdir(cur.c_str(), 0755) != 0 && errno != EEXIST)
      return ErrnoToStatus(errno, absl::StrCat("cannot create ", cur));
  }
  return absl::OkStatus();
}

absl::Status RemoveTree(const std::string &path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0)
    return absl::OkStatus();
  if (S_ISDIR(st.st_mode)) {
    if (DIR *d = ::opendir(path.c_str())) {
      while (dirent *e = ::readdir(d)) {
        const std::string n = e->d_name;
        if (n != "." && n != "..")
          BT_RETURN_IF_ERROR(RemoveTree(path + "/" + n));
      }
      ::closedir(d);
    }
    if (::rmdir(path.c_str()) != 0)
      return ErrnoToStatus(errno, absl::StrCat("cannot remove ", path));
  } else if (::unlink(path.c_str()) != 0) {
    return ErrnoToStatus(errno, absl::StrCat("cannot remove ", path));
  }
  return absl::OkStatus();
}

void FsyncDir(const std::string &dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

std::vector<std::string> ListDir(const std::string &dir) {
  std::vector<std::string> names;
  if (DIR *d = ::opendir(dir.c_str())) {
    while (dirent *e = ::readdir(d)) {
      const std::string n = e->d_name;
      if (n != "." && n != "..")
        names.push_back(n);
    }
    ::closedir(d);
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::string ReadLink(const std::string &path) {
  char buf[4096];
  ssize_t n = ::readlink(path.c_str(), buf, sizeof(buf) - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

std::string CheckpointName(int64_t step) { return absl::StrFormat("step-%06d", step); }

std::string Hex(uint64_t v) { return absl::StrFormat("%016x", v); }

/// Where a checkpoint of `dir` is: dir/latest, or dir itself.
absl::StatusOr<std::string> ResolveCheckpoint(const std::string &dir) {
  if (Exists(dir + "/latest/trainer_state.json"))
    return dir + "/" + ReadLink(dir + "/latest");
  if (Exists(dir + "/trainer_state.json"))
    return dir;
  return absl::NotFoundError(absl::StrCat(
      "--resume ", dir, ": no checkpoint (neither ", dir,
      "/latest/trainer_state.json nor ", dir, "/trainer_state.json)"));
}

/// The directory a checkpoint belongs to (its OUT): the parent of
/// step-NNNNNN, or the directory itself.
std::string RunDirOf(const std::string &checkpoint) {
  size_t slash = checkpoint.find_last_of('/');
  std::string base = slash == std::string::npos ? checkpoint : checkpoint.substr(slash + 1);
  if (absl::StartsWith(base, "step-"))
    return slash == std::string::npos ? "." : checkpoint.substr(0, slash);
  return checkpoint;
}

/// Runs argv (environment + `env`), waits; returns the exit status. With
/// `quiet`, its stdout and stderr go to /dev/null (gnuplot's warnings).
absl::StatusOr<int>
RunProcess(const std::vector<std::string> &argv,
           const std::map<std::string, std::string> &env_over,
           bool quiet) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (quiet) {
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  }
  pid_t pid = 0;
  int rc = SpawnWithEnv(argv, env_over, &actions, &pid);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0)
    return ErrnoToStatus(rc, absl::StrCat("cannot run ", argv[0]));
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status))
    return WEXITSTATUS(status);
  return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

bool HaveProgram(const std::string &name) {
  const char *path = getenv("PATH");
  for (absl::string_view dir : absl::StrSplit(path ? path : "/usr/bin:/bin", ':'))
    if (access(absl::StrCat(dir, "/", name).c_str(), X_OK) == 0)
      return true;
  return false;
}

/// Plots with gnuplot into DIR/NAME: `commands` (after the terminal and
/// output settings) go to a script DIR/.NAME.gp, gnuplot renders into
/// DIR/.NAME.tmp, and the image is written to DIR/NAME through
/// WriteFileAtomically (so a symbolic link there stays one). Returns "" or a
/// note saying why there is no plot (gnuplot missing or failing: not an
/// error).
std::string RenderGnuplot(const std::string &dir, const std::string &name,
                          const std::string &commands) {
  if (!HaveProgram("gnuplot"))
    return absl::StrCat("gnuplot not found: no ", name, " (Debian package gnuplot-nox)");
  const std::string tmp = absl::StrCat(dir, "/.", name, ".tmp");
  const std::string script_path = absl::StrCat(dir, "/.", name, ".gp");
  const std::string script = absl::StrCat("set terminal png size 900,540\nset output '", tmp,
                                          "'\n", commands);
  if (!WriteFileAtomically(script_path, script).ok())
    return "cannot write the gnuplot script";
  absl::StatusOr<int> rc = RunProcess({"gnuplot", script_path}, {}, /*quiet=*/true);
  ::unlink(script_path.c_str());
  absl::StatusOr<std::string> png =
      rc.ok() && *rc == 0 ? ReadFile(tmp) : absl::StatusOr<std::string>(absl::UnknownError(""));
  ::unlink(tmp.c_str());
  if (!png.ok())
    return absl::StrCat("gnuplot failed: no ", name);
  if (absl::Status s = WriteFileAtomically(absl::StrCat(dir, "/", name), *png); !s.ok())
    return std::string(s.message());
  return "";
}

absl::Status ResolveSeqLen(const proto::ModelConfig &config, int64_t &seq_len,
                           const std::string &config_source) {
  const int64_t L = config.block_length();
  const bool given = seq_len != 0;
  if (!given)
    seq_len = config.max_length() > 0 ? config.max_length() : 256;
  if (L > 0 && seq_len % L == 0 && seq_len / L >= 2)
    return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "train: ",
      given ? absl::StrCat("--seq-len ", seq_len)
            : absl::StrCat("the sequence length ", seq_len, " (max_length of ", config_source,
                           "; no --seq-len given)"),
      " must be a multiple of the block length ", L, " with at least 2 blocks",
      given ? "" : "; pass --seq-len or fix max_length"));
}

} // namespace bt::rt::train_internal

namespace bt::rt {

using namespace train_internal;

//===----------------------------------------------------------------------===//
// Preparing a model for bt-run train.
//===----------------------------------------------------------------------===//

absl::StatusOr<TrainModelFiles> PrepareTrainingModel(const TrainModelSetup &setup,
                                                     std::ostream &log) {
  const TrainOptions &o = setup.train;
  TrainModelFiles files;
  if (!o.resume_dir.empty()) {
    if (!setup.config_path.empty() || !setup.tokenizer_path.empty())
      return absl::InvalidArgumentError(
          "train --resume takes the model's config and tokenizer from the checkpoint; "
          "drop --config / --tokenizer");
    BT_ASSIGN_OR_RETURN(std::string ckpt, ResolveCheckpoint(o.resume_dir));
    files.config_path = ckpt + "/config.yaml";
    if (!Exists(files.config_path))
      return absl::NotFoundError(
          absl::StrCat("--resume: ", files.config_path, " does not exist"));
    for (proto::TokenizerKind kind : {proto::TOKENIZER_SENTENCEPIECE, proto::TOKENIZER_HF_JSON})
      if (Exists(absl::StrCat(ckpt, "/", TokenizerFileName(kind))))
        files.tokenizer_path = absl::StrCat(ckpt, "/", TokenizerFileName(kind));
    if (files.tokenizer_path.empty())
      return absl::NotFoundError(absl::StrCat("--resume: ", ckpt,
                                              " has no tokenizer.model or tokenizer.json"));
    return files;
  }
  if (setup.config_path.empty())
    return absl::InvalidArgumentError("train: missing --config <config.yaml|config.json>");
  BT_RETURN_IF_ERROR(CheckTrainOutputDir(o, /*after_prepare=*/false));
  BT_ASSIGN_OR_RETURN(proto::ModelConfig config, LoadModelConfig(setup.config_path));
  if (config.kind() != proto::ModelConfig::BLOCK_TRANSFORMER)
    return absl::UnimplementedError(absl::StrCat(
        setup.config_path, ": train supports Block Transformer models only"));
  BT_RETURN_IF_ERROR(MakeDirs(o.output_dir));

  std::string tokenizer_bytes;
  if (!setup.tokenizer_path.empty()) {
    BT_ASSIGN_OR_RETURN(tokenizer_bytes, ReadFile(setup.tokenizer_path));
  } else {
    SentencePieceTrainOptions spm = setup.spm;
    if (spm.vocab_size == 0)
      spm.vocab_size = config.vocab_size();
    spm.eos_id = static_cast<int>(config.eos_token_id());
    spm.unk_id = spm.eos_id == 1 ? 0 : 1;
    const auto t0 = std::chrono::steady_clock::now();
    BT_ASSIGN_OR_RETURN(std::vector<std::string> docs, ReadDocuments(o.data_paths, o.split));
    std::vector<std::string> sentences = SentencesForTokenizer(docs, spm.max_sentence_length);
    log << "tokenizer: training SentencePiece (" << SentencePieceTrainArgs(spm) << ") on "
        << sentences.size() << " lines of " << docs.size() << " documents ... " << std::flush;
    absl::StatusOr<std::string> m = TrainSentencePiece(sentences, spm);
    if (!m.ok()) {
      log << "failed\n";
      return absl::Status(m.status().code(),
                          absl::StrCat("training the tokenizer: ", m.status().message()));
    }
    tokenizer_bytes = std::move(*m);
    log << absl::StrFormat(
        "done (%.1f s)\n",
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  const std::string tokenizer_name =
      setup.tokenizer_path.empty() ? "the trained tokenizer" : setup.tokenizer_path;
  const proto::TokenizerKind kind = DetectTokenizerKind(tokenizer_bytes);
  absl::StatusOr<std::unique_ptr<Tokenizer>> tok = Tokenizer::Load(kind, tokenizer_bytes);
  if (!tok.ok())
    return absl::Status(tok.status().code(),
                        absl::StrCat(tokenizer_name, ": ", tok.status().message()));
  if ((*tok)->eos_id() != config.eos_token_id())
    return absl::InvalidArgumentError(absl::StrCat(
        tokenizer_name, ": EOS id ", (*tok)->eos_id(), ", the config's eos_token_id is ",
        config.eos_token_id()));
  // A SentencePiece model sets the vocabulary; a tokenizer.json's ids fit in
  // the config's (Pythia pads its 50277 ids to 50304 embeddings), which grows
  // only if they do not.
  if ((*tok)->vocab_size() != config.vocab_size() &&
      (kind == proto::TOKENIZER_SENTENCEPIECE || (*tok)->vocab_size() > config.vocab_size())) {
    log << "model: vocab_size " << config.vocab_size() << " -> " << (*tok)->vocab_size()
        << " (the tokenizer's)\n";
    config.set_vocab_size((*tok)->vocab_size());
  }
  if (config.pad_token_id() < 0 || config.pad_token_id() >= config.vocab_size()) {
    log << "model: pad_token_id " << config.pad_token_id() << " -> " << config.eos_token_id()
        << " (EOS; outside the vocabulary)\n";
    config.set_pad_token_id(config.eos_token_id());
  }
  TrainOptions yaml_opts = o;
  // Checked here, before the compile (issue 14: after a 10 s compile the
  // error named a --seq-len the user had not given).
  BT_RETURN_IF_ERROR(ResolveSeqLen(config, yaml_opts.seq_len, setup.config_path));
  config.set_max_length(yaml_opts.seq_len);
  files.config_path = o.output_dir + "/model-config.yaml";
  files.tokenizer_path = absl::StrCat(o.output_dir, "/", TokenizerFileName(kind));
  BT_RETURN_IF_ERROR(WriteFileAtomically(
      files.config_path,
      OfficialTrainerYaml(config, yaml_opts,
                          absl::StrCat(TokenizerKindName(kind), ", ", files.tokenizer_path,
                                       setup.tokenizer_path.empty()
                                           ? absl::StrCat(" (trained: ",
                                                          SentencePieceTrainArgs(setup.spm), ")")
                                           : absl::StrCat(" (from ", setup.tokenizer_path, ")")))));
  BT_RETURN_IF_ERROR(WriteFileAtomically(files.tokenizer_path, tokenizer_bytes));
  return files;
}

} // namespace bt::rt
