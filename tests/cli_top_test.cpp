// `dlock top` and the one status layout as real processes: one view with
// --once (text and JSON), the limit and the per-kind summary, --kind, a
// live view in a pipe that sees a hold taken after it started and ends on
// SIGINT, one that shows a database error in place of a view and recovers,
// one on a terminal that redraws in place and ends on Ctrl-C, and bad
// arguments refused before the database is touched.
#include <dlock/dlock.hpp>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <signal.h>
#include <sys/wait.h>

#include <string>
#include <vector>

#include "child_process.hpp"
#include "cli_fixture.hpp"
#include "terminal.hpp"
#include "test_env.hpp"

namespace dlock {
namespace {

using namespace std::chrono_literals;
using test::ChildProcess;
using test::Cli;

TEST_F(Cli, TopOnceShowsTheLongestHeldFirstWithASummary) {
  DatabaseDistributedLock client(options_);
  Owner owner = Owner::create();
  std::vector<Lock> locks;
  for (const char* name : {"oldest", "middle", "newest"}) {
    locks.push_back(client.get_lock(name, owner));
    locks.back().lock();
    std::this_thread::sleep_for(5ms);  // distinct grant times
  }
  Semaphore sem = client.get_semaphore("pool", 4);
  Permit p = sem.acquire();

  auto [out, code] = run(args({"top", "--once", "--limit", "2"}));
  ASSERT_EQ(code, 0) << out;
  EXPECT_NE(out.find("4 holds (3 lock, 1 semaphore)"), std::string::npos) << out;
  EXPECT_NE(out.find("showing the 2 longest held"), std::string::npos) << out;
  const auto oldest = out.find("oldest"), middle = out.find("middle");
  ASSERT_NE(oldest, std::string::npos) << out;
  ASSERT_NE(middle, std::string::npos) << out;
  EXPECT_LT(oldest, middle) << out;
  EXPECT_EQ(out.find("newest"), std::string::npos) << "cut by the limit: " << out;
  EXPECT_EQ(out.find('\x1b'), std::string::npos) << "no escape codes in a pipe";

  std::tie(out, code) = run(args({"top", "--once", "--json", "--kind", "semaphore"}));
  ASSERT_EQ(code, 0) << out;
  const auto j = nlohmann::json::parse(out);
  EXPECT_EQ(j["held"]["semaphore"], 1);
  EXPECT_EQ(j["held"]["lock"], 0) << "--kind filters the counts too";
  ASSERT_EQ(j["holds"].size(), 1u);
  EXPECT_EQ(j["holds"][0]["name"], "pool");
  EXPECT_EQ(j["holds"][0]["bound"], 4);
  EXPECT_EQ(j["holds"][0]["machine_id"], client.machine_id());
  p.release();
  for (auto& l : locks) l.unlock();
}

TEST_F(Cli, TopInAPipeShowsEachViewUntilInterrupted) {
  ASSERT_EQ(run(args({"init"})).second, 0);
  ChildProcess top(test::cli_path(), args({"top", "--interval", "200ms"}), true);
  ASSERT_TRUE(top.wait_for_line("0 holds", 20s).has_value());
  DatabaseDistributedLock client(options_);
  client.lock("late");
  ASSERT_TRUE(top.wait_for_line("late ", 20s).has_value()) << "a hold taken after the view started";
  client.unlock("late");
  ASSERT_TRUE(top.wait_for_line("0 holds", 20s).has_value()) << "and its release";
  top.kill(SIGINT);
  const auto status = top.wait(20s);
  ASSERT_TRUE(status.has_value()) << "top did not end on SIGINT";
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << *status;
}

// The database going away shows as an error in place of a view, and the
// views come back when it does: here its account is locked and its session
// killed, then the account unlocked.
TEST_F(Cli, TopShowsADatabaseErrorAndRecoversWhenTheDatabaseIsBack) {
  ASSERT_EQ(run(args({"init"})).second, 0);
  const std::string account = test::private_account();
  const std::string url = test::database_url_as(account, "table=" + options_.table);
  ChildProcess top(test::cli_path(), {"--url", url, "top", "--interval", "200ms"}, true);
  ASSERT_TRUE(top.wait_for_line("0 holds", 20s).has_value());
  test::execute_sql("ALTER USER '" + account + "'@'127.0.0.1' ACCOUNT LOCK");
  test::kill_sessions_of(account);
  const auto error = top.wait_for_line("dlock top: ", 20s);  // "dlock top: DB.T at TIME: database error: ..."
  const bool error_shown = error.has_value() && error->find("database error") != std::string::npos;
  test::execute_sql("ALTER USER '" + account + "'@'127.0.0.1' ACCOUNT UNLOCK");
  ASSERT_TRUE(error_shown) << "no error view while the database refused the account";
  EXPECT_TRUE(top.wait_for_line("0 holds", 20s).has_value()) << "the views did not come back";
  top.kill(SIGINT);
  const auto status = top.wait(20s);
  ASSERT_TRUE(status.has_value());
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << *status;
}

TEST_F(Cli, TopOnATerminalRedrawsInPlaceAndEndsOnCtrlC) {
  ASSERT_EQ(run(args({"init"})).second, 0);
  std::vector<std::string> argv{test::cli_path()};
  for (const auto& a : args({"top", "--interval", "200ms"})) argv.push_back(a);
  test::Terminal terminal(argv);
  ASSERT_TRUE(terminal.shows("\x1b[H\x1b[2J", 20s)) << terminal.screen();
  ASSERT_TRUE(terminal.shows("0 holds", 20s)) << terminal.screen();
  terminal.type("\x03");  // Ctrl-C: SIGINT to the foreground process group
  const auto code = terminal.exit_code(20s);
  ASSERT_TRUE(code.has_value()) << terminal.screen();
  EXPECT_EQ(*code, 0) << terminal.screen();
}

TEST_F(Cli, TopRefusesBadArgumentsBeforeTheDatabase) {
  const std::string dead = "mysql://u:p@127.0.0.1:1/d";
  for (const auto& a : std::vector<std::vector<std::string>>{
           {"--url", dead, "top", "--kind", "mutex"},
           {"--url", dead, "top", "--interval", "10ms"},
           {"--url", dead, "top", "--limit", "-1"},
           {"--url", dead, "top", std::string(256, 'n')},
           {"--url", dead, "top", "--hex", "zz"},
       }) {
    const auto [out, code] = run(a);
    EXPECT_EQ(code, 2) << a[3] << ": " << out;
  }
  const auto [out, code] = run({"--url", dead + "?connect_timeout_ms=1000", "top", "--once"}, 30s);
  EXPECT_EQ(code, 3) << "a database error: " << out;
}

TEST_F(Cli, StatusShowsEveryKindInOneLayout) {
  DatabaseDistributedLock client(options_);
  client.lock("a-lock");
  ReadWriteLock rw = client.get_read_write_lock("a-rw");
  rw.lock();
  Election e = client.get_election("an-election");
  const std::uint64_t term = e.campaign("x");
  auto [out, code] = run(args({"status"}));
  ASSERT_EQ(code, 0) << out;
  // One header; each kind in the KIND column.
  EXPECT_EQ(out.find("NAME"), 0u) << out;
  EXPECT_EQ(out.find("NAME", 1), std::string::npos) << "one table: " << out;
  for (const char* kind : {" lock ", " write ", " election "}) EXPECT_NE(out.find(kind), std::string::npos) << kind << out;
  std::tie(out, code) = run(args({"status", "--json", "an-election"}));
  const auto j = nlohmann::json::parse(out);
  EXPECT_EQ(j["kind"], "election");
  EXPECT_EQ(j["fence"], term);
  e.resign();
  rw.unlock();
  client.unlock("a-lock");
}

}  // namespace
}  // namespace dlock
