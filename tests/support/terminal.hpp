// A program in the foreground of a pseudo-terminal, as in a shell: what it
// writes to the screen, keys typed at it, and its exit code.
#pragma once

#include <pty.h>
#include <signal.h>
#include <sys/select.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace dlock::test {

class Terminal {
 public:
  explicit Terminal(const std::vector<std::string>& argv) {
    pid_ = ::forkpty(&master_, nullptr, nullptr, nullptr);
    if (pid_ == 0) {
      std::vector<char*> a;
      for (const auto& s : argv) a.push_back(const_cast<char*>(s.c_str()));
      a.push_back(nullptr);
      ::execv(a[0], a.data());
      ::_exit(127);
    }
  }
  ~Terminal() {
    if (pid_ > 0 && !reaped_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    if (master_ >= 0) ::close(master_);
  }
  void type(const std::string& text) { (void)::write(master_, text.data(), text.size()); }
  // Reads the screen until `text` shows up or `timeout` passes.
  bool shows(const std::string& text, std::chrono::milliseconds timeout) {
    const auto end = std::chrono::steady_clock::now() + timeout;
    while (screen_.find(text) == std::string::npos && std::chrono::steady_clock::now() < end) {
      fd_set fds;
      FD_ZERO(&fds);
      FD_SET(master_, &fds);
      timeval tv{0, 50'000};
      if (::select(master_ + 1, &fds, nullptr, nullptr, &tv) > 0) {
        char buf[256];
        const ssize_t n = ::read(master_, buf, sizeof buf);
        if (n > 0) screen_.append(buf, static_cast<std::size_t>(n));
      }
    }
    return screen_.find(text) != std::string::npos;
  }
  std::optional<int> exit_code(std::chrono::milliseconds timeout) {
    const auto end = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < end) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        reaped_ = true;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      shows("\x01never", 20ms);  // keep draining the terminal
    }
    return std::nullopt;
  }
  const std::string& screen() const { return screen_; }

 private:
  pid_t pid_ = -1;
  int master_ = -1;
  bool reaped_ = false;
  std::string screen_;
};

}  // namespace dlock::test
