// A real child process for multi-process tests: spawned with posix_spawn,
// its stdout read line by line with deadlines, killed and reaped on
// destruction so a failing test never leaves workers behind.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace dlock::test {

class ChildProcess {
 public:
  // `merge_stderr`: the child's stderr goes to the same pipe as its stdout.
  // `stdin_pipe`: the child's stdin is a pipe fed by write(); otherwise it
  // inherits this process's stdin.
  ChildProcess(const std::string& program, const std::vector<std::string>& args, bool merge_stderr = false,
               bool stdin_pipe = false);
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  // Next line of the child's stdout, or nullopt at EOF or after `timeout`.
  std::optional<std::string> read_line(std::chrono::milliseconds timeout);
  // Reads lines until one starts with `prefix`; returns it (nullopt on
  // timeout or EOF).
  std::optional<std::string> wait_for_line(const std::string& prefix, std::chrono::milliseconds timeout);
  void kill(int signal);
  // Writes to the child's stdin (needs `stdin_pipe`).
  void write(const std::string& text);
  // Waits for exit; returns the raw wait status, or nullopt on timeout.
  std::optional<int> wait(std::chrono::milliseconds timeout);
  // Reads everything until EOF (or `timeout`), then waits for exit. Returns
  // the output; `status` gets the raw wait status (-1 on timeout).
  std::string read_all_and_wait(std::chrono::milliseconds timeout, int& status);

 private:
  pid_t pid_ = -1;
  int stdout_fd_ = -1;
  int stdin_fd_ = -1;
  std::string buffer_;
  bool reaped_ = false;
};

// Path of the dlock_test_helper binary built next to the tests.
std::string helper_path();
// Path of the dlock command.
std::string cli_path();

}  // namespace dlock::test
