//===- child_process.h - a child process speaking JSON lines ----*- C++ -*-===//
//
// The PyTorch baselines (bench/bt_torch.py --serve for `bench`, --train-serve
// for `train --baseline torch`) run as child processes that answer one JSON
// object per line on stdout to one request line on stdin, so that bt and
// PyTorch can take turns call by call on the same (possibly shared) machine.
//
// The baselines' interpreter and script are found in one place
// (BaselinePython, BaselineScript), for `bench` and `train` alike.
//
//===----------------------------------------------------------------------===//

#ifndef BT_RUNTIME_CHILD_PROCESS_H
#define BT_RUNTIME_CHILD_PROCESS_H

#include <spawn.h>
#include <sys/types.h>

#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace bt::rt {

/// The Python interpreter of the PyTorch baselines: `flag` (--python) when
/// not empty, else $BT_PYTHON when set and not empty, else /usr/bin/python3.
std::string BaselinePython(const std::string &flag);

/// The PyTorch baseline script (the repository's bench/bt_torch.py): `flag`
/// (--torch-script) when not empty, else $BT_TORCH_SCRIPT when set and not
/// empty, else bt_torch.py in share/bt/ next to the running executable's
/// folder, <dir of /proc/self/exe>/../share/bt/bt_torch.py: the build
/// copies bench/bt_torch.py to <build>/share/bt/ for the tools in
/// <build>/bin, and an installed tree keeps it at <prefix>/share/bt/. Never
/// relative to the working directory. The result is not checked (the
/// callers say when it is unreadable).
std::string BaselineScript(const std::string &flag);

/// posix_spawnp of `argv` (a bare argv[0] is looked up in $PATH; argv must
/// not be empty) with this process's environment, in which `env_overrides`
/// replace (or add) the variables of their names, and `actions` (null:
/// none). Sets `*pid` and returns posix_spawnp's result: 0, or the errno
/// value why the program could not be started.
int SpawnWithEnv(const std::vector<std::string> &argv,
                 const std::map<std::string, std::string> &env_overrides,
                 const posix_spawn_file_actions_t *actions, pid_t *pid);

class JsonLineChild {
public:
  /// Starts `argv` (a bare argv[0] is looked up in $PATH) with
  /// `env_overrides` added to this process's environment; its stdin is a
  /// socket (writing to an exited child is an error, not SIGPIPE), its
  /// stdout is read here, its stderr is ours. Reads the first JSON line
  /// into `first_line`. Errors: Unavailable when the program cannot be
  /// started or exits before its first line.
  static absl::StatusOr<std::unique_ptr<JsonLineChild>>
  Start(const std::vector<std::string> &argv,
        const std::map<std::string, std::string> &env_overrides,
        std::string *first_line);
  /// Closes the child's stdin (the scripts exit at EOF) and waits for it.
  ~JsonLineChild();

  /// Sends `json_line` and returns the reply line. Errors: Internal when
  /// the child has exited or replies {"error": message} (the message is in
  /// the status).
  absl::StatusOr<std::string> Request(const std::string &json_line);

  /// The two halves of Request, for protocols with several lines per
  /// request (bench's progress lines): sends one line; reads the next JSON
  /// line (lines not starting with '{' are skipped), unchecked. Errors:
  /// Internal when the child has exited.
  absl::Status Send(const std::string &json_line);
  absl::StatusOr<std::string> ReadReply();

private:
  JsonLineChild() = default;
  pid_t pid_ = -1;
  int to_child_ = -1;
  FILE *from_child_ = nullptr;
};

} // namespace bt::rt

#endif // BT_RUNTIME_CHILD_PROCESS_H
