// `dlock run`: hold a lock (a semaphore permit, or a side of a read-write
// lock) while a command runs, like flock(1). `dlock elect`: the same with
// the leadership of an election.
#pragma once

#include <dlock/lock.hpp>
#include <dlock/options.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace dlock::cli {

struct RunArgs {
  std::string name;
  // > 0 (--permits N): hold one permit of semaphore `name` with bound N
  // instead of the lock `name`.
  std::uint32_t permits = 0;
  // --shared / --exclusive: the read / write side of read-write lock `name`.
  details::LockSide side = details::LockSide::kMutex;
  // nullopt: wait forever; zero: one attempt (--no-wait).
  std::optional<Millis> wait;
  // nullopt: watchdog mode.
  std::optional<Millis> lease;
  // --at-least: when the command has run, the name stays taken until this
  // long after the grant (Lock::unlock_at_least), so a job started by cron
  // on several hosts runs once per slot. Zero: released at once.
  Millis at_least{0};
  // `dlock elect`: campaign in election `name` with `value`, run the
  // command while leader, resign when it ends.
  bool elect = false;
  std::string value;
  int conflict_exit_code = 1;
  Millis kill_after{10'000};
  // How often the hold is confirmed in the database while the command runs,
  // so a force-unlock is noticed within this time.
  Millis check_interval{1'000};
  std::vector<std::string> command;
};

// Returns the process exit code (see exit_codes.hpp).
int run_command(Options options, const RunArgs& args);

}  // namespace dlock::cli
