// `dlock run` as a process supervisor: the command lives in a process group
// of its own, never outlives dlock (kill -9 included), is stopped with its
// background jobs when the lock is lost, keeps the terminal when it is
// interactive; dlock copes with an inherited ignored SIGCHLD and waits for
// the lock in one library wait that a signal interrupts.
#include <dlock/dlock.hpp>
#include <gtest/gtest.h>
#include <pty.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "child_process.hpp"
#include "cli_fixture.hpp"
#include "terminal.hpp"
#include "test_env.hpp"

namespace dlock {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using test::ChildProcess;
using test::Cli;
using test::kLockLost;
using test::Terminal;

// True when `pid` is gone or a zombie (dead, not yet reaped by its new parent).
bool dead(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  if (!stat) return true;
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  const auto close = text.rfind(')');
  return close == std::string::npos || close + 2 >= text.size() || text[close + 2] == 'Z';
}

// "pids A B" -> {A, B}
std::vector<pid_t> pids_of(const std::string& line) {
  std::istringstream in(line.substr(line.find(' ') + 1));
  std::vector<pid_t> out;
  pid_t p = 0;
  while (in >> p) out.push_back(p);
  return out;
}

// A command with a background job that ignores SIGTERM, printing both pids.
const char* const kCommandWithBackgroundJob =
    "sh -c 'trap \"\" TERM; exec sleep 300' & echo \"pids $$ $!\"; wait";

TEST_F(Cli, KillingDlockKillsTheCommandAndItsBackgroundJobs) {
  ChildProcess dlock(test::cli_path(), args({"run", "k", "--", "sh", "-c", kCommandWithBackgroundJob}), true);
  const auto line = dlock.wait_for_line("pids", 20s);
  ASSERT_TRUE(line.has_value());
  const auto pids = pids_of(*line);
  ASSERT_EQ(pids.size(), 2u) << *line;
  EXPECT_FALSE(dead(pids[0]) || dead(pids[1]));
  dlock.kill(SIGKILL);  // dlock alone, not its group
  ASSERT_TRUE(dlock.wait(5s).has_value());
  // Before: the command kept running unprotected, and a new holder could
  // start beside it once the lease ran out.
  EXPECT_TRUE(test::wait_until([&] { return dead(pids[0]); }, 5s)) << "the command outlived dlock";
  EXPECT_TRUE(test::wait_until([&] { return dead(pids[1]); }, 5s)) << "the command's background job outlived dlock";
}

TEST_F(Cli, LosingTheLockStopsTheCommandsWholeGroup) {
  ChildProcess dlock(test::cli_path(),
                     args({"run", "--kill-after", "500ms", "g", "--", "sh", "-c", kCommandWithBackgroundJob}), true);
  const auto line = dlock.wait_for_line("pids", 20s);
  ASSERT_TRUE(line.has_value());
  const auto pids = pids_of(*line);
  ASSERT_EQ(pids.size(), 2u) << *line;
  DatabaseDistributedLock admin(options_);
  ASSERT_TRUE(admin.force_unlock("g"));
  int status = 0;
  const std::string said = dlock.read_all_and_wait(20s, status);
  ASSERT_NE(status, -1);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == kLockLost) << said;
  EXPECT_TRUE(test::wait_until([&] { return dead(pids[0]); }, 5s)) << "the command survived the loss";
  // Before: the SIGTERM/SIGKILL went to the command alone.
  EXPECT_TRUE(test::wait_until([&] { return dead(pids[1]); }, 5s)) << "a background job of the command survived";
}

TEST_F(Cli, CommandRunsInAProcessGroupOfItsOwn) {
  const std::string out = file("pgid");
  auto [said, code] = run(args({"run", "p", "--", "sh", "-c", "ps -o pgid= -p $$ > '" + out + "'; echo $PPID >> '" + out + "'"}));
  ASSERT_EQ(code, 0) << said;
  std::istringstream in(slurp(out));
  pid_t pgid = 0, keeper = 0;
  in >> pgid >> keeper;
  EXPECT_EQ(pgid, keeper) << "the command is not in its keeper's group";
  EXPECT_NE(pgid, ::getpgrp());
}

TEST_F(Cli, InteractiveCommandGetsTheTerminal) {
  std::vector<std::string> argv{test::cli_path()};
  for (const auto& a : args({"run", "tty", "--", "sh", "-c", "echo ready; read line; echo got:$line"}))
    argv.push_back(a);
  Terminal terminal(argv);
  ASSERT_TRUE(terminal.shows("ready", 20s)) << terminal.screen();
  terminal.type("hello\n");
  // A command in a background group would be stopped by SIGTTIN here.
  EXPECT_TRUE(terminal.shows("got:hello", 10s)) << terminal.screen();
  EXPECT_EQ(terminal.exit_code(10s), 0) << terminal.screen();
}

TEST_F(Cli, CtrlCAtTheTerminalReachesTheCommandAndReleasesTheLock) {
  std::vector<std::string> argv{test::cli_path()};
  for (const auto& a : args({"run", "tty", "--", "sh", "-c", "echo ready; exec sleep 30"})) argv.push_back(a);
  Terminal terminal(argv);
  ASSERT_TRUE(terminal.shows("ready", 20s)) << terminal.screen();
  terminal.type("\x03");
  EXPECT_EQ(terminal.exit_code(10s), 128 + SIGINT) << terminal.screen();
  DatabaseDistributedLock client(options_);
  EXPECT_FALSE(client.is_locked("tty"));
}

TEST_F(Cli, AnInheritedIgnoredSigchldDoesNotHangRun) {
  std::vector<std::string> a{"exec-ignoring-sigchld", test::cli_path()};
  for (const auto& x : args({"run", "c", "--", "sh", "-c", "exit 3"})) a.push_back(x);
  // Before: waitpid failed with ECHILD, taken as "still running": forever.
  auto [said, code] = run_program(test::helper_path(), a, 20s);
  EXPECT_EQ(code, 3) << said;
  DatabaseDistributedLock client(options_);
  EXPECT_FALSE(client.is_locked("c"));
}

TEST_F(Cli, WaitingIsOneLibraryWaitNotShortSlices) {
  if (!test::fast_wakeup_enabled()) GTEST_SKIP() << "observed through the bell wait";
  const std::string account = test::private_account();
  DatabaseDistributedLock holder(options_);
  holder.lock("w");
  ChildProcess dlock(test::cli_path(),
                     {"--url", test::database_url_as(account, "table=" + options_.table + "&poll_interval_ms=100"),
                      "run", "--wait", "30s", "w", "--", "true"},
                     true);
  // One bell wait lasting seconds. Before: every 250 ms the wait ended,
  // its bell wait was KILLed and armed again, so none lasted a second.
  EXPECT_TRUE(test::wait_until(
      [&] {
        return test::query_scalar("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE USER = '" + account +
                                  "' AND STATE = 'User lock' AND TIME >= 2") == "1";
      },
      10s))
      << "no long bell wait";
  holder.unlock("w");
  int status = 0;
  const std::string said = dlock.read_all_and_wait(20s, status);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << said;
}

TEST_F(Cli, ASignalInterruptsTheWaitAtOnce) {
  DatabaseDistributedLock holder(options_);
  holder.lock("i");
  ChildProcess dlock(test::cli_path(), args({"-v", "run", "--wait", "60s", "i", "--", "true"}), true);
  ASSERT_TRUE(dlock.wait_for_line("", 20s).has_value());  // started and talking to the database
  std::this_thread::sleep_for(300ms);
  const auto start = Clock::now();
  dlock.kill(SIGTERM);
  const auto status = dlock.wait(10s);
  ASSERT_TRUE(status.has_value());
  EXPECT_LT(Clock::now() - start, 3s);
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 128 + SIGTERM) << *status;
  EXPECT_TRUE(holder.is_held_by_current_thread("i"));
  holder.unlock("i");
}

}  // namespace
}  // namespace dlock
