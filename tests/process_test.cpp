// Multi-process behaviour with real processes (dlock_test_helper).
#include <dlock/dlock.hpp>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <memory>
#include <thread>
#include <string>
#include <vector>

#include "child_process.hpp"
#include "test_env.hpp"

namespace dlock {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using test::ChildProcess;
using test::fresh_options;
using test::same_table;
using test::url_for;

std::uint64_t fence_from(const std::string& line) { return std::stoull(line.substr(line.find(' ') + 1)); }

void expect_dead_holder_freed_within_lease(const Options& options, const std::string& lease_arg, Millis lease) {
  DatabaseDistributedLock client(options);
  ChildProcess holder(test::helper_path(), {url_for(options), "hold", "crash", lease_arg});
  const auto line = holder.wait_for_line("acquired", 15s);
  ASSERT_TRUE(line.has_value()) << "helper never acquired";
  const auto helper_fence = fence_from(*line);
  EXPECT_FALSE(client.try_lock("crash"));
  holder.kill(SIGKILL);
  ASSERT_TRUE(holder.wait(5s).has_value());
  const auto killed_at = Clock::now();
  ASSERT_TRUE(client.try_lock("crash", lease + 5s));
  EXPECT_LT(Clock::now() - killed_at, lease + 2s);
  EXPECT_GT(client.fencing_token("crash"), helper_fence);
  client.unlock("crash");
}

TEST(Processes, ProcessThatDiesHoldingAFixedLeaseLockFreesItWithinTheLease) {
  expect_dead_holder_freed_within_lease(fresh_options(), "1500", 1500ms);
}

TEST(Processes, ProcessThatDiesHoldingAWatchdogLockFreesItWithinTheLease) {
  const Options options = fresh_options();  // watchdog_timeout 1.5 s
  expect_dead_holder_freed_within_lease(options, "0", options.watchdog_timeout);
}

TEST(Processes, WaiterInAnotherProcessGetsTheLockAfterRelease) {
  Options options = fresh_options();
  options.poll_interval = 300ms;
  options.watchdog_timeout = 30s;
  DatabaseDistributedLock client(options);
  client.lock("xproc");
  const auto fence = client.fencing_token("xproc");
  ChildProcess waiter(test::helper_path(), {url_for(options), "wait", "xproc", "20000"});
  ASSERT_TRUE(waiter.wait_for_line("waiting", 15s).has_value()) << "the waiter was never refused";
  client.unlock("xproc");
  const auto line = waiter.wait_for_line("", 15s);
  ASSERT_TRUE(line.has_value());
  ASSERT_EQ(line->rfind("acquired", 0), 0u) << *line;
  EXPECT_GT(fence_from(*line), fence);
}

TEST(Processes, SeveralProcessesDoingReadModifyWriteOnARowLoseNothing) {
  const Options options = fresh_options();
  const std::string counter = options.table + "_counter";
  test::execute_sql("DROP TABLE IF EXISTS `" + counter + "`");
  test::execute_sql("CREATE TABLE `" + counter + "` (id INT PRIMARY KEY, value BIGINT NOT NULL)");
  test::execute_sql("INSERT INTO `" + counter + "` VALUES (1, 0)");
  constexpr int kProcesses = 4;
  constexpr int kRounds = 30;
  std::vector<std::unique_ptr<ChildProcess>> workers;
  for (int i = 0; i < kProcesses; ++i) {
    workers.push_back(std::make_unique<ChildProcess>(
        test::helper_path(),
        std::vector<std::string>{url_for(options), "rmw", "row", counter, std::to_string(kRounds)}));
  }
  for (auto& w : workers) {
    const auto line = w->wait_for_line("", 120s);
    ASSERT_TRUE(line.has_value());
    EXPECT_EQ(*line, "done");
    const auto status = w->wait(10s);
    ASSERT_TRUE(status.has_value());
    EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0);
  }
  EXPECT_EQ(test::query_scalar("SELECT value FROM `" + counter + "` WHERE id = 1"),
            std::to_string(kProcesses * kRounds));
  test::execute_sql("DROP TABLE `" + counter + "`");
}

}  // namespace
}  // namespace dlock
