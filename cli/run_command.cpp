// Acquire, spawn the command with DLOCK_NAME / DLOCK_FENCE, forward SIGINT,
// SIGTERM and SIGHUP to it, and watch the hold. If the hold is lost while the
// command runs, the command is terminated (SIGTERM, then SIGKILL after
// --kill-after) because it is no longer protected: its next write could race
// the new holder's. A database error while merely *confirming* the hold is
// not a loss (the watchdog decides that, by the lease), so a short outage
// does not kill a healthy job.
#include "run_command.hpp"

#include <dlock/dlock.hpp>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstring>
#include <iostream>
#include <thread>

#include "duration.hpp"
#include "exit_codes.hpp"
#include "log_format.hpp"

extern char** environ;

namespace dlock::cli {

namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

constexpr int kForwarded[] = {SIGINT, SIGTERM, SIGHUP};
volatile std::sig_atomic_t pending[3] = {0, 0, 0};

void on_signal(int sig) {
  for (int i = 0; i < 3; ++i)
    if (kForwarded[i] == sig) pending[i] = 1;
}

void install_handlers() {
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  for (int sig : kForwarded) sigaction(sig, &sa, nullptr);
}

// The first pending signal, cleared; 0 if none.
int take_pending() {
  for (int i = 0; i < 3; ++i) {
    if (pending[i] != 0) {
      pending[i] = 0;
      return kForwarded[i];
    }
  }
  return 0;
}

int exit_code_of(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

// Acquires in slices so a signal can interrupt the wait. Returns the signal
// that interrupted it (> 0), 0 when acquired, -1 when the wait ran out.
int acquire(DatabaseDistributedLock& client, const RunArgs& args) {
  const auto try_once = [&](Millis wait) {
    return args.lease ? client.try_lock(args.name, wait, *args.lease) : client.try_lock(args.name, wait);
  };
  if (args.wait && *args.wait <= Millis::zero()) return try_once(Millis::zero()) ? 0 : -1;
  const auto deadline = args.wait ? Clock::now() + *args.wait : Clock::time_point::max();
  for (;;) {
    if (const int sig = take_pending()) return sig;
    Millis slice = 250ms;
    if (args.wait) {
      const auto left = std::chrono::ceil<Millis>(deadline - Clock::now());
      if (left <= Millis::zero()) return -1;
      slice = std::min(slice, left);
    }
    if (try_once(slice)) return 0;
  }
}

std::vector<std::string> child_environment(const RunArgs& args, std::uint64_t fence) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::strncmp(*e, "DLOCK_NAME=", 11) == 0 || std::strncmp(*e, "DLOCK_FENCE=", 12) == 0) continue;
    env.emplace_back(*e);
  }
  env.push_back("DLOCK_NAME=" + args.name);
  env.push_back("DLOCK_FENCE=" + std::to_string(fence));
  return env;
}

pid_t spawn(const RunArgs& args, std::uint64_t fence) {
  std::vector<std::string> env = child_environment(args, fence);
  std::vector<char*> envp;
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_storage = args.command;
  std::vector<char*> argv;
  for (auto& a : argv_storage) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t defaults;
  sigemptyset(&defaults);
  for (int sig : kForwarded) sigaddset(&defaults, sig);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF);
  pid_t pid = -1;
  const int rc = posix_spawnp(&pid, argv[0], nullptr, &attr, argv.data(), envp.data());
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    std::cerr << "dlock: cannot run " << args.command[0] << ": " << std::strerror(rc) << "\n";
    return rc == ENOENT ? -127 : -126;
  }
  return pid;
}

}  // namespace

int run_command(Options options, const RunArgs& args) {
  std::atomic<bool> lost{false};
  options.on_lock_lost = [&lost, &args](std::string_view name, std::uint64_t) {
    if (name == args.name) lost = true;
  };
  install_handlers();
  DatabaseDistributedLock client(options);

  const int acquired = acquire(client, args);
  if (acquired > 0) return 128 + acquired;  // interrupted while waiting
  if (acquired < 0) {
    std::cerr << "dlock: " << details::printable(args.name) << " is held by another owner"
              << (args.wait && *args.wait > Millis::zero() ? "; gave up after " + format_duration(*args.wait) : "")
              << "\n";
    return args.conflict_exit_code;
  }

  const std::uint64_t fence = client.fencing_token(args.name);
  const pid_t child = spawn(args, fence);
  if (child < 0) {
    client.unlock(args.name);
    return -child;
  }

  const char* lost_why = nullptr;
  auto next_check = Clock::now() + args.check_interval;
  std::optional<Clock::time_point> terminated_at;
  bool killed = false;
  int status = 0;
  for (;;) {
    const pid_t r = waitpid(child, &status, WNOHANG);
    if (r == child) break;
    while (const int sig = take_pending()) kill(child, sig);
    const auto now = Clock::now();
    if (lost_why == nullptr) {
      if (lost) {
        lost_why = "the lease could not be renewed or the lock was taken over";
      } else if (now >= next_check) {
        next_check = now + args.check_interval;
        try {
          if (!client.is_held_by_current_thread(args.name)) lost_why = "it was force-unlocked or its lease ran out";
        } catch (const BackendError&) {
          // Cannot confirm right now; the lease decides (the watchdog reports).
        }
      }
      if (lost_why != nullptr) {
        std::cerr << "dlock: lost the lock on " << details::printable(args.name) << " (fence " << fence
                  << "): " << lost_why << "; terminating the command (SIGKILL after "
                  << format_duration(args.kill_after) << ")\n";
        kill(child, SIGTERM);
        terminated_at = now;
      }
    } else if (!killed && terminated_at && now - *terminated_at >= args.kill_after) {
      kill(child, SIGKILL);
      killed = true;
    }
    std::this_thread::sleep_for(10ms);
  }
  client.unlock(args.name);  // never throws for database trouble
  return lost_why != nullptr ? kExitLockLost : exit_code_of(status);
}

}  // namespace dlock::cli
