// `dlock run`: acquire, run the command while holding the lock, release.
// `dlock elect`: campaign, run the command while leader, resign; a lost
// leadership stops the command as a lost lock does.
//
// Process layout. dlock forks a small *keeper* process that makes itself the
// leader of a new process group, then forks and execs the command inside that
// group. So:
//   * the command, and anything it starts in its group (a shell's background
//     jobs), can be stopped as a whole: when the hold is lost, dlock sends
//     SIGTERM to the group, then SIGKILL after --kill-after;
//   * the command never outlives dlock: dlock holds the write end of a
//     "lifeline" pipe that the keeper watches; when dlock dies, however it
//     dies, the kernel closes that end, the keeper sees the hang-up and kills
//     its whole group with SIGKILL, so a `kill -9` of dlock cannot leave the
//     command running unprotected while the lease runs out and another holder
//     starts (a dlock that died before the keeper looked is seen at once: the
//     pipe is already hung up). No signal handler is involved, so this also
//     holds where signal delivery is deferred (sanitizer runtimes). The
//     command itself dies if the keeper does (PR_SET_PDEATHSIG);
//   * when dlock runs in the terminal's foreground, the command's group gets
//     the terminal (interactive commands read and get Ctrl-C/Ctrl-Z), and
//     dlock takes it back when the command ends.
// The keeper reports the command's raw wait status through a pipe and exits.
// Between fork and exec only async-signal-safe calls are made.
//
// Signals. SIGINT, SIGTERM and SIGHUP are blocked in every dlock thread and
// taken by a signal thread (sigtimedwait): while dlock waits for the lock,
// one interrupts the wait (exit 128 + N); while the command runs, each is
// forwarded to the command's group. SIGCHLD is reset to its default at start
// (an ignored SIGCHLD, inherited from a parent, would make the kernel reap
// the keeper behind dlock's back).
//
// Watching the hold. Every --check-interval the hold is confirmed in the
// database; a database error while merely confirming is not a loss (the
// watchdog decides that, by the lease), so a short outage does not kill a
// healthy job.
#include "run_command.hpp"

#include <dlock/dlock.hpp>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <iostream>
#include <thread>
#include <utility>

#include <dlock/asio.hpp>

#include "api/tools.hpp"
#include "duration.hpp"
#include "exit_codes.hpp"
#include "activity_view.hpp"
#include "names.hpp"

extern char** environ;

namespace dlock::cli {

namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

constexpr int kForwarded[] = {SIGINT, SIGTERM, SIGHUP};

sigset_t forwarded_set() {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : kForwarded) sigaddset(&set, sig);
  return set;
}

// Takes the forwarded signals on a thread of its own. `on_signal` runs on
// that thread for each one (it may take locks: this is no signal handler).
class SignalThread {
 public:
  template <class Fn>
  explicit SignalThread(Fn on_signal)
      : thread_([this, on_signal] {
          const sigset_t set = forwarded_set();
          const timespec tick{0, 50'000'000};
          while (!stop_) {
            const int sig = sigtimedwait(&set, nullptr, &tick);
            if (sig > 0) on_signal(sig);
          }
        }) {}
  ~SignalThread() {
    stop_ = true;
    thread_.join();
  }
  SignalThread(const SignalThread&) = delete;
  SignalThread& operator=(const SignalThread&) = delete;

 private:
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

int exit_code_of(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

std::vector<std::string> child_environment(const RunArgs& args, std::uint64_t fence, const std::string& guard_sql) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::strncmp(*e, "DLOCK_NAME=", 11) == 0 || std::strncmp(*e, "DLOCK_FENCE=", 12) == 0 ||
        std::strncmp(*e, "DLOCK_SLOT=", 11) == 0 || std::strncmp(*e, "DLOCK_TERM=", 11) == 0 ||
        std::strncmp(*e, "DLOCK_GUARD_SQL=", 16) == 0)
      continue;
    env.emplace_back(*e);
  }
  env.push_back("DLOCK_NAME=" + args.name);
  env.push_back("DLOCK_FENCE=" + std::to_string(fence));
  env.push_back("DLOCK_GUARD_SQL=" + guard_sql);
  if (args.elect) env.push_back("DLOCK_TERM=" + std::to_string(fence));  // the term is the fence
  return env;
}

// The program `command` names, searched in PATH like execvp does; sets
// `error` (ENOENT, EACCES) when there is none to run. Done before forking:
// the keeper may not allocate.
std::string resolve(const std::string& command, int& error) {
  const auto runnable = [&](const std::string& path) {
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) return ENOENT;
    if (S_ISDIR(st.st_mode) || ::access(path.c_str(), X_OK) != 0) return EACCES;
    return 0;
  };
  if (command.find('/') != std::string::npos) {
    error = runnable(command);
    return command;
  }
  const char* path_env = std::getenv("PATH");
  const std::string path = path_env != nullptr ? path_env : "/usr/local/bin:/usr/bin:/bin";
  error = ENOENT;
  std::size_t start = 0;
  for (;;) {
    const std::size_t end = path.find(':', start);
    std::string dir = path.substr(start, end == std::string::npos ? std::string::npos : end - start);
    if (dir.empty()) dir = ".";
    const std::string candidate = dir + "/" + command;
    const int e = runnable(candidate);
    if (e == 0) {
      error = 0;
      return candidate;
    }
    if (e == EACCES) error = EACCES;  // found, not executable: keep looking, remember
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return {};
}

struct Spawned {
  pid_t keeper = -1;
  int status_fd = -1;    // read end: the command's raw wait status
  int lifeline_fd = -1;  // write end, held until the keeper is reaped
};

// Everything the keeper and the command need, prepared before fork().
struct Launch {
  std::string path;
  std::vector<std::string> argv_storage, env_storage;
  std::vector<char*> argv, envp;
  bool take_terminal = false;
};

// Makes the caller's process group the terminal's foreground group. A
// background process doing so would get SIGTTOU, so it is blocked meanwhile.
// Async-signal-safe (the keeper calls it between fork and exec).
void take_terminal() {
  sigset_t ttou, old;
  sigemptyset(&ttou);
  sigaddset(&ttou, SIGTTOU);
  ::sigprocmask(SIG_BLOCK, &ttou, &old);
  ::tcsetpgrp(STDIN_FILENO, ::getpgrp());
  ::sigprocmask(SIG_SETMASK, &old, nullptr);
}

// How often the keeper looks at its lifeline and its command.
constexpr int kKeeperTickMs = 20;

[[noreturn]] void keeper_main(const Launch& l, int status_fd, int lifeline_fd) {
  ::setpgid(0, 0);
  // Signals dlock forwards to the group are for the command; the keeper
  // stays to report its status.
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sigemptyset(&sa.sa_mask);
  sa.sa_handler = SIG_IGN;
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT}) ::sigaction(sig, &sa, nullptr);
  if (l.take_terminal) take_terminal();
  const pid_t keeper_pid = ::getpid();
  const pid_t command = ::fork();
  if (command == 0) {
    ::close(status_fd);
    ::close(lifeline_fd);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != keeper_pid) ::_exit(128 + SIGKILL);
    sa.sa_handler = SIG_DFL;
    for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGCHLD, SIGTTOU, SIGTTIN, SIGTSTP, SIGPIPE})
      ::sigaction(sig, &sa, nullptr);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::execve(l.path.c_str(), l.argv.data(), l.envp.data());
    ::_exit(errno == ENOENT ? 127 : 126);
  }
  int status = 126 << 8;
  if (command > 0) {
    for (;;) {
      pollfd lifeline{lifeline_fd, POLLIN, 0};
      if (::poll(&lifeline, 1, kKeeperTickMs) > 0 && (lifeline.revents & (POLLHUP | POLLIN | POLLERR)) != 0)
        ::kill(0, SIGKILL);  // dlock is gone: the whole group goes, this keeper included
      const pid_t r = ::waitpid(command, &status, WNOHANG);
      if (r == command) break;
      if (r < 0 && errno != EINTR) {
        status = (128 + SIGKILL) << 8;
        break;
      }
    }
  }
  const char* p = reinterpret_cast<const char*>(&status);
  std::size_t left = sizeof status;
  while (left > 0) {
    const ssize_t n = ::write(status_fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    p += n;
    left -= static_cast<std::size_t>(n);
  }
  ::_exit(0);
}

Spawned spawn(const Launch& l) {
  int status[2], lifeline[2];
  if (::pipe2(status, O_CLOEXEC) != 0) return {};
  if (::pipe2(lifeline, O_CLOEXEC) != 0) {
    ::close(status[0]);
    ::close(status[1]);
    return {};
  }
  const pid_t keeper = ::fork();
  if (keeper == 0) {
    ::close(status[0]);
    ::close(lifeline[1]);
    keeper_main(l, status[1], lifeline[0]);
  }
  ::close(status[1]);
  ::close(lifeline[0]);
  if (keeper < 0) {
    ::close(status[0]);
    ::close(lifeline[1]);
    return {};
  }
  ::setpgid(keeper, keeper);  // also here: whichever runs first wins, no race
  if (l.take_terminal) ::tcsetpgrp(STDIN_FILENO, keeper);
  return {keeper, status[0], lifeline[1]};
}

// The command's wait status as the keeper reported it; the keeper's own
// status if it reported none (it was killed).
int command_status(const Spawned& s, int keeper_status) {
  int status = 0;
  char* p = reinterpret_cast<char*>(&status);
  std::size_t got = 0;
  while (got < sizeof status) {
    const ssize_t n = ::read(s.status_fd, p + got, sizeof status - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<std::size_t>(n);
  }
  ::close(s.status_fd);
  return got == sizeof status ? status : keeper_status;
}

// True once the keeper has exited; leaves it unreaped (a zombie still holds
// its pid, so the group id cannot be reused while dlock may signal it).
bool keeper_exited(pid_t keeper) {
  siginfo_t info;
  std::memset(&info, 0, sizeof info);
  for (;;) {
    if (::waitid(P_PID, static_cast<id_t>(keeper), &info, WEXITED | WNOHANG | WNOWAIT) == 0) return info.si_pid == keeper;
    if (errno == EINTR) continue;
    return true;  // ECHILD: nothing left to wait for
  }
}

int reap(pid_t keeper) {
  int status = 0;
  for (;;) {
    if (::waitpid(keeper, &status, 0) == keeper) return status;
    if (errno != EINTR) return (128 + SIGKILL) << 8;
  }
}

// What dlock holds while the command runs: the lock NAME, one permit of the
// semaphore NAME (--permits), a side of the read-write lock NAME (--shared,
// --exclusive), or the leadership of election NAME (`dlock elect`).
class Held {
 public:
  Held(DatabaseDistributedLock& client, const Options& options, const RunArgs& args)
      : engine_(details::EngineAccess::of(client)),
        elections_(details::EngineAccess::elections(client)),
        options_(options),
        args_(args),
        semaphore_(args.permits != 0 ? std::optional<Semaphore>(client.get_semaphore(args.name, args.permits))
                                     : std::nullopt),
        lock_(args.side == details::LockSide::kMutex  ? client.get_lock(args.name)
              : args.side == details::LockSide::kFair ? client.get_fair_lock(args.name)
              : args.side == details::LockSide::kRead ? client.get_read_write_lock(args.name).read_lock()
                                                      : client.get_read_write_lock(args.name).write_lock()),
        election_(args.elect ? std::optional<Election>(client.get_election(args.name)) : std::nullopt) {}

  // One wait with the library's own deadline (its bells and poller), not a
  // series of short waits that re-arm them every time. False: not had
  // (refused, timed out, or `interrupted`).
  bool acquire(const std::atomic<bool>& interrupted) {
    const bool once = args_.wait && *args_.wait <= Millis::zero();
    if (election_) {
      details::AcquireRequest request =
          engine_.make_request(key(), Owner::this_thread().id(), std::nullopt, args_.wait);
      request.value = args_.value;
      const auto term = elections_.campaign(request, once ? nullptr : &interrupted);
      term_ = term.value_or(0);
      return term.has_value();
    }
    const std::uint64_t owner = semaphore_ ? Owner::create().id() : Owner::this_thread().id();
    const details::AcquireRequest request =
        engine_.make_request(key(), owner, args_.lease, args_.wait, args_.permits);
    const bool had = engine_.drive(request, once ? nullptr : &interrupted).next == details::AcquireStep::Next::kAcquired;
    if (had && semaphore_) {
      owner_ = owner;
      permit_ = asio_impl::PermitAccess::adopt(*semaphore_, owner);
    }
    return had;
  }
  // Ends a wait in acquire() (from the signal thread).
  void interrupt() { engine_.interrupt_waits(key()); }
  // Who has it, for the refusal message.
  std::string holders() {
    try {
      ActivityQuery query;
      query.names = {args_.name};
      query.types = {type()};
      const Activity now = inspect(options_, query);
      const auto& holds = now.holds;
      if (election_) {
        if (holds.empty()) return "nobody (a campaign elsewhere is about to win)";
        return readable_name(holds[0].machine) + " (host " + readable_name(holds[0].host) + ", pid " +
               std::to_string(holds[0].pid) + "), term " + std::to_string(holds[0].fence);
      }
      if (args_.side == details::LockSide::kFair) {
        if (!holds.empty()) return holder_summary(holds[0]);
        return "nobody, but others queue for it (a try never overtakes them)";
      }
      if (args_.permits != 0)
        return std::to_string(holds.size()) + " permit holder(s) (bound " + std::to_string(args_.permits) + ")";
      if (args_.side != details::LockSide::kMutex) {
        // The other side keeps this one out: a writer, or the readers.
        query.types = {args_.side == details::LockSide::kRead ? HoldType::kWrite : HoldType::kRead};
        const Activity other = inspect(options_, query);
        if (other.holds.empty()) return "a waiting writer (new readers wait behind it)";
        if (other.holds[0].type == HoldType::kWrite) return "writer " + holder_summary(other.holds[0]);
        return std::to_string(other.holds.size()) + " reader(s)";
      }
      if (!holds.empty()) return holder_summary(holds[0]);
    } catch (const BackendError&) {
      // Who it was is a courtesy; the exit code says what matters.
    }
    return "another owner";
  }
  // The kind of hold this run takes.
  HoldType type() const {
    if (election_) return HoldType::kElection;
    if (semaphore_) return HoldType::kSemaphore;
    switch (args_.side) {
      case details::LockSide::kFair: return HoldType::kFairLock;
      case details::LockSide::kRead: return HoldType::kRead;
      case details::LockSide::kWrite: return HoldType::kWrite;
      default: return HoldType::kLock;
    }
  }
  // The fencing token: the lock's (or the side's), or the permit's slot's.
  std::uint64_t fence() {
    if (election_) return term_;
    return semaphore_ ? permit_.fencing_token() : lock_.fencing_token();
  }
  // The permit's slot (0 for a lock).
  std::uint32_t slot() { return semaphore_ ? permit_.slot() : 0; }
  // The guard statement of the hold (docs/guarded-transactions.md).
  std::string guard_sql() {
    if (election_) return election_->guard_sql();
    return semaphore_ ? permit_.guard_sql() : lock_.guard_sql();
  }
  // Throws BackendError when it cannot tell.
  bool still_held() {
    if (election_) return election_->is_leader();
    if (!semaphore_) return lock_.is_held_by_current_thread();
    return permit_.held() && engine_.confirmed_hold(key(), owner_).has_value();
  }
  // With `at_least` (the command has run): kept taken that long after the
  // grant.
  void release(Millis at_least = Millis::zero()) {
    if (election_) {
      election_->resign();  // never throws for database trouble
    } else if (semaphore_) {
      permit_.release();  // never throws
    } else {
      lock_.unlock_at_least(at_least);  // never throws for database trouble
    }
  }
  const char* what() const {
    return args_.elect                                  ? "the leadership"
           : args_.permits != 0                         ? "the permit"
           : args_.side == details::LockSide::kRead  ? "the read lock"
           : args_.side == details::LockSide::kWrite ? "the write lock"
           : args_.side == details::LockSide::kFair  ? "the fair lock"
                                                     : "the lock";
  }

 private:
  details::NameKeyView key() const {
    if (semaphore_) return details::NameKeyView{details::Kind::kSemaphore, args_.name};
    if (election_) return details::NameKeyView{details::Kind::kElection, args_.name};
    return details::key_of(args_.side, args_.name);
  }
  details::Engine& engine_;
  details::Elections& elections_;
  const Options& options_;
  const RunArgs& args_;
  std::optional<Semaphore> semaphore_;
  Lock lock_;      // the lock, or the side of the read-write lock (unless --permits)
  Permit permit_;  // with --permits
  std::uint64_t owner_ = 0;
  std::optional<Election> election_;  // `dlock elect`
  std::uint64_t term_ = 0;
};

}  // namespace

int run_command(Options options, const RunArgs& args) {
  // An inherited "ignore" would let the kernel reap our children for us.
  ::signal(SIGCHLD, SIG_DFL);
  // Blocked before the client starts its threads, so they inherit the mask
  // and only the signal thread takes these.
  const sigset_t forwarded = forwarded_set();
  ::pthread_sigmask(SIG_BLOCK, &forwarded, nullptr);

  std::atomic<bool> lost{false};
  options.on_lock_lost = [&lost, &args](std::string_view name, std::uint64_t) {
    if (name == args.name) lost = true;
  };
  DatabaseDistributedLock client(options);
  Held held(client, options, args);

  std::atomic<int> pending{0};
  std::atomic<bool> interrupted{false};
  std::atomic<bool> waiting{true};
  SignalThread signals([&](int sig) {
    pending = sig;
    if (waiting) {
      interrupted = true;
      held.interrupt();
    }
  });

  const bool acquired = held.acquire(interrupted);
  waiting = false;
  if (!acquired) {
    if (interrupted) return 128 + pending.load();
    std::cerr << "dlock: "
              << (args.elect                                  ? "election "
                  : args.permits != 0                         ? "semaphore "
                  : args.side == details::LockSide::kFair  ? "fair lock "
                  : args.side != details::LockSide::kMutex ? "read-write lock "
                                                           : "")
              << readable_name(args.name) << (args.elect ? " is led by " : " is held by ")
              << held.holders()
              << (args.wait && *args.wait > Millis::zero() ? "; gave up after " + format_duration(*args.wait) : "")
              << "\n";
    return args.conflict_exit_code;
  }

  int resolve_error = 0;
  Launch launch;
  launch.path = resolve(args.command[0], resolve_error);
  if (resolve_error != 0) {
    std::cerr << "dlock: cannot run " << args.command[0] << ": " << std::strerror(resolve_error) << "\n";
    held.release();
    return resolve_error == ENOENT ? 127 : 126;
  }
  const std::uint64_t fence = held.fence();
  launch.argv_storage = args.command;
  for (auto& a : launch.argv_storage) launch.argv.push_back(a.data());
  launch.argv.push_back(nullptr);
  std::string guard_sql;
  try {
    guard_sql = held.guard_sql();
  } catch (const Error&) {
    // Lost already (the command is stopped at the next check): a statement
    // that fails as a lost hold's guard does, never one that passes.
    guard_sql = "SELECT (SELECT 1 UNION ALL SELECT 2)";
  }
  launch.env_storage = child_environment(args, fence, guard_sql);
  if (args.permits != 0) launch.env_storage.push_back("DLOCK_SLOT=" + std::to_string(held.slot()));
  for (auto& e : launch.env_storage) launch.envp.push_back(e.data());
  launch.envp.push_back(nullptr);
  launch.take_terminal = ::isatty(STDIN_FILENO) == 1 && ::tcgetpgrp(STDIN_FILENO) == ::getpgrp();

  const Spawned child = spawn(launch);
  if (child.keeper < 0) {
    std::cerr << "dlock: cannot start " << args.command[0] << ": " << std::strerror(errno) << "\n";
    held.release();
    return 126;
  }
  const pid_t group = child.keeper;

  const char* lost_why = nullptr;
  auto next_check = Clock::now() + args.check_interval;
  std::optional<Clock::time_point> terminated_at;
  for (;;) {
    const bool exited = keeper_exited(child.keeper);
    if (const int sig = pending.exchange(0)) ::kill(-group, sig);
    const auto now = Clock::now();
    if (lost_why == nullptr) {
      if (exited) break;
      if (lost) {
        lost_why = "the lease could not be renewed or the lock was taken over";
      } else if (now >= next_check) {
        next_check = now + args.check_interval;
        try {
          if (!held.still_held()) lost_why = "it was force-unlocked or its lease ran out";
        } catch (const BackendError&) {
          // Cannot confirm right now; the lease decides (the watchdog reports).
        }
      }
      if (lost_why != nullptr) {
        std::cerr << "dlock: lost " << held.what() << " on " << readable_name(args.name) << " (fence " << fence
                  << "): " << lost_why << "; terminating the command (SIGKILL after "
                  << format_duration(args.kill_after) << ")\n";
        ::kill(-group, SIGTERM);
        terminated_at = now;
      }
    } else if (exited || now - *terminated_at >= args.kill_after) {
      // Whatever of the group is still there (background jobs that ignored
      // SIGTERM) is killed; the keeper is still unreaped, so the group id
      // still names this group.
      ::kill(-group, SIGKILL);
      break;
    }
    std::this_thread::sleep_for(10ms);
  }
  const int keeper_status = reap(child.keeper);
  ::close(child.lifeline_fd);
  if (launch.take_terminal) take_terminal();  // dlock's group again
  const int status = command_status(child, keeper_status);
  held.release(args.at_least);  // never throws for database trouble
  return lost_why != nullptr ? kExitLockLost : exit_code_of(status);
}

}  // namespace dlock::cli
