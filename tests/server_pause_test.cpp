// The database stops answering (the server is paused with SIGSTOP, which
// clients see as a network stall): operations fail with BackendError within
// the timeouts instead of hanging, unlock() does not throw, and the client
// recovers once the server runs again. Runs alone (RUN_SERIAL): it pauses the
// server every other test uses.
#include <dlock/dlock.hpp>
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "test_env.hpp"

namespace dlock {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// True once every thread of process `pid` is stopped: kill() returns before
// a thread running on another core has stopped, and a statement it is
// executing can still complete.
bool all_threads_stopped(long pid) {
  const std::string tasks = "/proc/" + std::to_string(pid) + "/task";
  std::error_code ec;
  for (const auto& task : std::filesystem::directory_iterator(tasks, ec)) {
    std::ifstream stat(task.path() / "stat");
    std::string line;
    std::getline(stat, line);
    const auto close = line.rfind(')');  // the command name may hold spaces
    if (close == std::string::npos || close + 2 >= line.size()) return false;
    const char state = line[close + 2];
    if (state != 'T' && state != 't') return false;
  }
  return !ec;
}

class PausedServer {
 public:
  explicit PausedServer(long pid) : pid_(pid) {
    ::kill(static_cast<pid_t>(pid_), SIGSTOP);
    EXPECT_TRUE(test::wait_until([&] { return all_threads_stopped(pid_); }, 5s)) << "the server did not stop";
  }
  ~PausedServer() { resume(); }
  void resume() {
    if (pid_ > 0) ::kill(static_cast<pid_t>(pid_), SIGCONT);
    pid_ = 0;
  }

 private:
  long pid_;
};

TEST(ServerPause, OperationsFailWithBackendErrorThenTheClientRecovers) {
  const long pid = test::database_pid();
  ASSERT_GT(pid, 0) << "cannot find the private server's pid (scripts/db.sh pid)";
  Options options = test::fresh_options();
  options.io_timeout = 2s;
  options.connect_timeout = 2s;
  DatabaseDistributedLock client(options);
  client.lock("held");
  {
    PausedServer paused(pid);
    const auto start = Clock::now();
    try {
      (void)client.try_lock("other");
      ADD_FAILURE() << "try_lock succeeded against a paused server";
    } catch (const BackendError& e) {
      EXPECT_NE(e.code(), 0) << e.what();
    }
    EXPECT_LT(Clock::now() - start, 15s) << "the timeout did not bound the failure";
    const auto unlock_start = Clock::now();
    EXPECT_NO_THROW(client.unlock("held"));
    EXPECT_LT(Clock::now() - unlock_start, 15s);
    EXPECT_THROW((void)client.is_locked("held"), BackendError);
  }
  // Recovered: broken connections were replaced.
  ASSERT_TRUE(test::wait_until(
      [&] {
        try {
          return client.try_lock("other");
        } catch (const BackendError&) {
          return false;
        }
      },
      20s));
  client.unlock("other");
  // "held" could not be released while paused; its lease (1.5 s) frees it.
  EXPECT_TRUE(client.try_lock("held", 10s));
  client.unlock("held");
}

TEST(ServerPause, RenewalFailingPastTheLeaseReportsTheHoldLost) {
  const long pid = test::database_pid();
  ASSERT_GT(pid, 0);
  Options options = test::fresh_options();
  options.io_timeout = 1s;
  options.connect_timeout = 1s;
  std::atomic<int> lost{0};
  options.on_lock_lost = [&](std::string_view name, std::uint64_t) {
    if (name == "renewed") ++lost;
  };
  DatabaseDistributedLock client(options);
  client.lock("renewed");  // watchdog lease 1.5 s
  {
    PausedServer paused(pid);
    EXPECT_TRUE(test::wait_until([&] { return lost.load() == 1; }, 10s)) << "loss not reported while renewals failed";
  }
  EXPECT_FALSE(client.is_held_by_current_thread("renewed"));
  EXPECT_EQ(client.fencing_token("renewed"), 0u);
  EXPECT_NO_THROW(client.unlock("renewed"));
  EXPECT_EQ(lost.load(), 1);
}

// kill -9 of the server and a restart on the same data directory: fences
// continue from where they were, and clients reconnect by themselves.
TEST(ServerRestart, FencesSurviveAndClientsReconnect) {
  ASSERT_GT(test::database_pid(), 0);
  Options options = test::fresh_options();
  options.io_timeout = 2s;
  options.connect_timeout = 2s;
  DatabaseDistributedLock client(options);
  client.lock("survivor");
  const auto before = client.fencing_token("survivor");
  client.unlock("survivor");
  ASSERT_EQ(std::system(DLOCK_SOURCE_DIR "/scripts/db.sh kill >/dev/null"), 0);
  ASSERT_EQ(std::system(DLOCK_SOURCE_DIR "/scripts/db.sh start >/dev/null"), 0);
  ASSERT_TRUE(test::wait_until(
      [&] {
        try {
          return client.try_lock("survivor");
        } catch (const BackendError&) {
          return false;
        }
      },
      30s));
  EXPECT_GT(client.fencing_token("survivor"), before);
  client.unlock("survivor");
}

}  // namespace
}  // namespace dlock
