//===- child_process.cc - a child process speaking JSON lines -------------===//

#include "bt/runtime/tooling/child_process.h"

#include <errno.h>
#include <cstdlib>
#include <fcntl.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "bt/runtime/base/file_util.h"
#include "bt/runtime/base/status_macros.h"
#include "nlohmann/json.hpp"

extern char **environ;

namespace bt::rt {

std::string BaselinePython(const std::string &flag) {
  if (!flag.empty())
    return flag;
  if (const char *p = getenv("BT_PYTHON"); p != nullptr && *p != '\0')
    return p;
  return "/usr/bin/python3";
}

std::string BaselineScript(const std::string &flag) {
  if (!flag.empty())
    return flag;
  if (const char *p = getenv("BT_TORCH_SCRIPT"); p != nullptr && *p != '\0')
    return p;
  std::string exe(4096, '\0');
  ssize_t n = ::readlink("/proc/self/exe", exe.data(), exe.size());
  std::string dir = ".";
  if (n > 0 && static_cast<size_t>(n) < exe.size()) {
    exe.resize(static_cast<size_t>(n));
    size_t slash = exe.rfind('/');
    dir = slash == std::string::npos ? "." : exe.substr(0, slash);
  }
  return absl::StrCat(dir, "/../share/bt/bt_torch.py");
}

namespace {

/// A child process: we write its stdin (a socket, so that writing to an
/// exited child is an error, not SIGPIPE) and read its stdout; its stderr
/// is ours.
struct Child {
  pid_t pid = -1;
  int to_child = -1;
  FILE *from_child = nullptr;
};

/// Starts `argv` (a bare argv[0] is looked up in $PATH) with
/// `env_overrides` added to this process's environment.
absl::StatusOr<Child>
SpawnChild(const std::vector<std::string> &argv,
           const std::map<std::string, std::string> &env_overrides) {
  int in[2], out[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, in) != 0)
    return ErrnoToStatus(errno, "socketpair");
  if (pipe2(out, O_CLOEXEC) != 0) {
    const int e = errno;
    close(in[0]);
    close(in[1]);
    return ErrnoToStatus(e, "pipe");
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in[1], STDIN_FILENO);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  pid_t pid = 0;
  int rc = SpawnWithEnv(argv, env_overrides, &actions, &pid);
  posix_spawn_file_actions_destroy(&actions);
  close(in[1]);
  close(out[1]);
  if (rc != 0) {
    close(in[0]);
    close(out[0]);
    return ErrnoToStatus(rc, absl::StrCat("cannot run ", argv[0]));
  }
  Child c;
  c.pid = pid;
  c.to_child = in[0];
  c.from_child = fdopen(out[0], "r");
  if (c.from_child == nullptr) {
    const int e = errno;
    close(out[0]);
    close(in[0]);
    waitpid(pid, nullptr, 0);
    return ErrnoToStatus(e, "fdopen");
  }
  return c;
}

/// The next line from `f` that starts with '{' (a JSON reply; other lines
/// are skipped), without the newline. Errors: OutOfRange at end of file.
absl::StatusOr<std::string> ReadLine(FILE *f) {
  std::string line;
  for (;;) {
    int c = fgetc(f);
    if (c == EOF && ferror(f) && errno == EINTR) {
      clearerr(f);
      continue;
    }
    if (c == EOF || c == '\n') {
      if (!line.empty() && line[0] == '{')
        return line;
      if (c == EOF)
        return absl::OutOfRangeError("end of the child's output");
      line.clear();
      continue;
    }
    line += static_cast<char>(c);
  }
}

} // namespace

int SpawnWithEnv(const std::vector<std::string> &argv,
                 const std::map<std::string, std::string> &env_overrides,
                 const posix_spawn_file_actions_t *actions, pid_t *pid) {
  std::vector<std::string> env;
  for (char **e = environ; e && *e; ++e) {
    std::string kv = *e;
    if (!env_overrides.count(kv.substr(0, kv.find('='))))
      env.push_back(kv);
  }
  for (const auto &[k, v] : env_overrides)
    env.push_back(k + "=" + v);
  std::vector<char *> cargv, cenv;
  for (const std::string &a : argv)
    cargv.push_back(const_cast<char *>(a.c_str()));
  cargv.push_back(nullptr);
  for (const std::string &e : env)
    cenv.push_back(const_cast<char *>(e.c_str()));
  cenv.push_back(nullptr);
  return posix_spawnp(pid, cargv[0], actions, nullptr, cargv.data(),
                      cenv.data());
}

absl::StatusOr<std::unique_ptr<JsonLineChild>>
JsonLineChild::Start(const std::vector<std::string> &argv,
                     const std::map<std::string, std::string> &env_overrides,
                     std::string *first_line) {
  absl::StatusOr<Child> child = SpawnChild(argv, env_overrides);
  if (!child.ok())
    return absl::UnavailableError(std::string(child.status().message()));
  std::unique_ptr<JsonLineChild> c(new JsonLineChild());
  c->pid_ = child->pid;
  c->to_child_ = child->to_child;
  c->from_child_ = child->from_child;
  absl::StatusOr<std::string> hello = ReadLine(c->from_child_);
  if (!hello.ok())
    return absl::UnavailableError(
        absl::StrCat(absl::StrJoin(argv, " "), " exited before it was ready"));
  *first_line = *hello;
  return c;
}

JsonLineChild::~JsonLineChild() {
  if (to_child_ >= 0)
    close(to_child_); // EOF: the script exits
  if (from_child_ != nullptr)
    fclose(from_child_);
  if (pid_ > 0) {
    int status = 0;
    while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
  }
}

absl::Status JsonLineChild::Send(const std::string &line) {
  if (to_child_ < 0)
    return absl::FailedPreconditionError("the child process is not running");
  const std::string msg = line + "\n";
  size_t done = 0;
  while (done < msg.size()) {
    ssize_t n = send(to_child_, msg.data() + done, msg.size() - done, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return absl::InternalError("the child process has exited");
    done += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> JsonLineChild::ReadReply() {
  if (from_child_ == nullptr)
    return absl::FailedPreconditionError("the child process is not running");
  absl::StatusOr<std::string> reply = ReadLine(from_child_);
  if (!reply.ok())
    return absl::InternalError(
        "the child process exited during a request (see its messages above)");
  return reply;
}

absl::StatusOr<std::string> JsonLineChild::Request(const std::string &line) {
  BT_RETURN_IF_ERROR(Send(line));
  BT_ASSIGN_OR_RETURN(std::string reply, ReadReply());
  nlohmann::json j = nlohmann::json::parse(reply, nullptr, false);
  if (j.is_object() && j.contains("error"))
    return absl::InternalError(j["error"].is_string() ? j["error"].get<std::string>()
                                                      : j["error"].dump());
  return reply;
}

} // namespace bt::rt
