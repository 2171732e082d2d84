// The dlock command, run as real processes against the private MariaDB.
#include <dlock/dlock.hpp>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <memory>
#include <algorithm>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "child_process.hpp"
#include "cli_fixture.hpp"
#include "test_env.hpp"

namespace dlock {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using test::ChildProcess;
using test::Cli;
using test::kLockLost;

TEST_F(Cli, TwoRunsOnOneNameNeverOverlap) {
  const std::string log = file("log");
  const std::string script = "echo start >> '" + log + "'; sleep 0.4; echo end >> '" + log + "'";
  ChildProcess a(test::cli_path(), args({"run", "job", "--", "sh", "-c", script}), true);
  ChildProcess b(test::cli_path(), args({"run", "job", "--", "sh", "-c", script}), true);
  int sa = 0, sb = 0;
  a.read_all_and_wait(30s, sa);
  b.read_all_and_wait(30s, sb);
  EXPECT_EQ(sa, 0);
  EXPECT_EQ(sb, 0);
  EXPECT_EQ(slurp(log), "start\nend\nstart\nend\n");
}

TEST_F(Cli, NoWaitOnAHeldNameExitsWithTheConflictCodeWithoutRunning) {
  DatabaseDistributedLock holder(options_);
  holder.lock("busy");
  const std::string marker = file("ran");
  auto [out, code] = run(args({"run", "--no-wait", "busy", "--", "touch", marker}));
  EXPECT_EQ(code, 1) << out;
  EXPECT_FALSE(exists(marker)) << "the command ran without the lock";
  EXPECT_NE(out.find("is held by"), std::string::npos) << out;
  std::tie(out, code) = run(args({"run", "--no-wait", "--conflict-exit-code", "75", "busy", "--", "touch", marker}));
  EXPECT_EQ(code, 75) << out;
  EXPECT_FALSE(exists(marker));
  holder.unlock("busy");
}

TEST_F(Cli, AtLeastRunsAJobStartedOnSeveralHostsOncePerSlot) {
  // Cron on three hosts, the first a little early: one run per slot.
  const std::string log = file("log");
  const std::vector<std::string> job{"run", "-n", "--at-least", "3s", "nightly", "--", "sh", "-c",
                                     "echo ran >> '" + log + "'"};
  const auto start = Clock::now();
  for (int host = 0; host < 3; ++host) {
    auto [out, code] = run(args(job));
    EXPECT_EQ(code, host == 0 ? 0 : 1) << "host " << host << ": " << out;
  }
  EXPECT_EQ(slurp(log), "ran\n") << "the job ran twice in its slot";
  DatabaseDistributedLock client(options_);
  EXPECT_TRUE(client.is_locked("nightly")) << "the name was freed when the job ended";
  // The next slot: it runs again once the first run's three seconds are over.
  auto [out, code] = run(args({"run", "--wait", "20s", "nightly", "--", "sh", "-c", "echo ran >> '" + log + "'"}));
  EXPECT_EQ(code, 0) << out;
  EXPECT_GE(Clock::now() - start, 2990ms) << "the next slot's run came inside the kept window";
  EXPECT_EQ(slurp(log), "ran\nran\n");
  // Bad values are usage errors, before the job runs.
  EXPECT_EQ(run(args({"run", "--at-least", "-1s", "nightly", "--", "true"})).second, 2);
  EXPECT_EQ(run(args({"run", "--at-least", "400d", "nightly", "--", "true"})).second, 2);
  EXPECT_EQ(run(args({"run", "--at-least", "1s", "--permits", "2", "nightly", "--", "true"})).second, 2);
}

TEST_F(Cli, ElectRunsTheCommandWhileLeaderAndResignsAfter) {
  const std::string env = file("env");
  auto [out, code] = run(args({"elect", "--value", "10.0.0.7:80", "sched", "--", "sh", "-c",
                               "echo \"$DLOCK_NAME $DLOCK_TERM $DLOCK_FENCE\" > '" + env + "'; exit 3"}));
  EXPECT_EQ(code, 3) << out;
  EXPECT_EQ(slurp(env), "sched 1 1\n");
  DatabaseDistributedLock client(options_);
  Election e = client.get_election("sched");
  EXPECT_FALSE(e.leader().leader.has_value()) << "still led after the command ended";
  // While one leads, a second candidate with -n does not run; with a wait it
  // runs once the first resigns, with a greater term.
  const std::string log = file("log");
  ChildProcess first(test::cli_path(),
                     args({"elect", "--value", "first", "sched", "--", "sh", "-c",
                           "echo first $DLOCK_TERM >> '" + log + "'; sleep 1; echo first-end >> '" + log + "'"}),
                     true);
  ASSERT_TRUE(test::wait_until([&] { return e.leader().leader.has_value(); }, 20s));
  EXPECT_EQ(e.leader().leader->value, "first");
  std::tie(out, code) = run(args({"elect", "-n", "sched", "--", "touch", file("ran")}));
  EXPECT_EQ(code, 1) << out;
  EXPECT_NE(out.find("is led by"), std::string::npos) << out;
  EXPECT_FALSE(exists(file("ran")));
  std::tie(out, code) = run(args({"elect", "--wait", "20s", "sched", "--", "sh", "-c",
                                  "echo second $DLOCK_TERM >> '" + log + "'"}));
  EXPECT_EQ(code, 0) << out;
  int status = 0;
  first.read_all_and_wait(20s, status);
  EXPECT_EQ(slurp(log), "first 2\nfirst-end\nsecond 3\n");
  // Bad input is a usage error before anything runs.
  EXPECT_EQ(run(args({"elect", "--value", std::string(64 * 1024 + 1, 'x'), "sched", "--", "true"})).second, 2);
  EXPECT_EQ(run(args({"elect", "sched"})).second, 2);
}

TEST_F(Cli, ElectStopsTheCommandWhenLeadershipIsLost) {
  const std::string marker = file("survived");
  ChildProcess elect(test::cli_path(),
                     args({"elect", "--check-interval", "100ms", "--kill-after", "1s", "sched", "--", "sh", "-c",
                           "sleep 30; touch '" + marker + "'"}),
                     true);
  DatabaseDistributedLock client(options_);
  Election e = client.get_election("sched");
  ASSERT_TRUE(test::wait_until([&] { return e.leader().leader.has_value(); }, 20s));
  test::execute_sql("UPDATE `" + options_.table + "` SET expire_time = NOW(6) - INTERVAL 1 SECOND WHERE kind = 6");
  ASSERT_TRUE(e.try_campaign("thief", 5000ms).has_value());
  int status = 0;
  const std::string out = elect.read_all_and_wait(20s, status);
  ASSERT_TRUE(WIFEXITED(status)) << out;
  EXPECT_EQ(WEXITSTATUS(status), kLockLost) << out;
  EXPECT_NE(out.find("lost the leadership"), std::string::npos) << out;
  EXPECT_FALSE(exists(marker));
  e.resign();
}

TEST_F(Cli, LeaderShowsTheLeaderAndWatchesChanges) {
  auto [out, code] = run(args({"leader", "svc"}));
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("no leader"), std::string::npos) << out;
  ChildProcess watch(test::cli_path(), args({"leader", "--watch", "--json", "svc"}), true);
  ASSERT_TRUE(watch.wait_for_line("{", 20s).has_value());  // the state now
  DatabaseDistributedLock client(options_);
  Election e = client.get_election("svc");
  const std::uint64_t term = e.campaign(std::string("v\0x", 3));
  const auto led = watch.wait_for_line("{", 20s);
  ASSERT_TRUE(led.has_value());
  EXPECT_NE(led->find("\"term\":" + std::to_string(term)), std::string::npos) << *led;
  EXPECT_NE(led->find("\"pid\":" + std::to_string(::getpid())), std::string::npos) << *led;
  EXPECT_NE(led->find("\"since\":"), std::string::npos) << *led;
  std::tie(out, code) = run(args({"status", "--json"}));
  EXPECT_NE(out.find("{\"kind\":\"election\",\"name\":\"svc\""), std::string::npos) << out;
  EXPECT_NE(out.find("\"fence\":" + std::to_string(term)), std::string::npos) << out;
  std::tie(out, code) = run(args({"status"}));
  EXPECT_NE(out.find(" election "), std::string::npos) << out;
  e.proclaim("w");
  const auto proclaimed = watch.wait_for_line("{", 20s);
  ASSERT_TRUE(proclaimed.has_value());
  EXPECT_NE(proclaimed->find("\"value\":\"w\""), std::string::npos) << *proclaimed;
  e.resign();
  const auto gone = watch.wait_for_line("{", 20s);
  ASSERT_TRUE(gone.has_value());
  EXPECT_NE(gone->find("\"leader\":null"), std::string::npos) << *gone;
  watch.kill(SIGINT);
  EXPECT_TRUE(watch.wait(10s).has_value()) << "--watch did not end on SIGINT";
  std::tie(out, code) = run(args({"leader", "--json", "svc"}));
  EXPECT_EQ(code, 0);
  EXPECT_NE(out.find("\"leader\":null"), std::string::npos) << out;
}

TEST_F(Cli, WaitGivesUpAfterAboutTheGivenTime) {
  DatabaseDistributedLock holder(options_);
  holder.lock("busy");
  const auto start = Clock::now();
  auto [out, code] = run(args({"run", "--wait", "1s", "busy", "--", "true"}));
  const auto took = Clock::now() - start;
  EXPECT_EQ(code, 1) << out;
  EXPECT_GE(took, 1s);
  EXPECT_LT(took, 6s);
  holder.unlock("busy");
}

TEST_F(Cli, ChildStatusAndSignalDeathComeThrough) {
  EXPECT_EQ(run(args({"run", "s", "--", "sh", "-c", "exit 7"})).second, 7);
  EXPECT_EQ(run(args({"run", "s", "--", "true"})).second, 0);
  EXPECT_EQ(run(args({"run", "s", "--", "sh", "-c", "kill -KILL $$"})).second, 128 + SIGKILL);
  EXPECT_EQ(run(args({"run", "s", "--", "/nonexistent/command"})).second, 127);
  // The lock is free after each.
  DatabaseDistributedLock client(options_);
  EXPECT_FALSE(client.is_locked("s"));
}

TEST_F(Cli, ChildSeesNameAndFenceAndTheFenceIsTheHolders) {
  const std::string out_file = file("env");
  auto [out, code] = run(args({"run", "envlock", "--", "sh", "-c",
                               "echo \"$DLOCK_NAME $DLOCK_FENCE\" > '" + out_file + "'"}));
  EXPECT_EQ(code, 0) << out;
  EXPECT_EQ(slurp(out_file), "envlock 1\n");
  std::tie(out, code) = run(args({"run", "envlock", "--", "sh", "-c", "echo \"$DLOCK_FENCE\" > '" + out_file + "'"}));
  EXPECT_EQ(slurp(out_file), "2\n");
}

TEST_F(Cli, SigtermToDlockReachesTheChildAndReleasesTheLock) {
  const std::string marker = file("got-term");
  const std::string script = "trap 'echo term > \"" + marker + "\"; exit 0' TERM; echo ready; while :; do sleep 0.05; done";
  ChildProcess p(test::cli_path(), args({"run", "sig", "--", "sh", "-c", script}), true);
  ASSERT_TRUE(p.wait_for_line("ready", 20s).has_value());
  p.kill(SIGTERM);
  const auto status = p.wait(20s);
  ASSERT_TRUE(status.has_value());
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << *status;
  EXPECT_TRUE(exists(marker)) << "the child never saw SIGTERM";
  DatabaseDistributedLock client(options_);
  EXPECT_FALSE(client.is_locked("sig")) << "the lock was not released";
}

TEST_F(Cli, ForceUnlockFromAnotherShellTerminatesTheChildWithTheLostCode) {
  ChildProcess p(test::cli_path(), args({"run", "--kill-after", "2s", "victim", "--", "sh", "-c",
                                         "echo ready; exec sleep 60"}),
                 true);
  ASSERT_TRUE(p.wait_for_line("ready", 20s).has_value());
  auto [out, code] = run(args({"force-unlock", "victim"}));
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("cleared victim"), std::string::npos) << out;
  const auto start = Clock::now();
  int status = 0;
  const std::string said = p.read_all_and_wait(20s, status);
  ASSERT_NE(status, -1) << "dlock run did not exit after losing the lock";
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == kLockLost) << said;
  EXPECT_LT(Clock::now() - start, 10s);
  EXPECT_NE(said.find("lost the lock"), std::string::npos) << said;
}

TEST_F(Cli, LeaseExpiryWhileTheChildRunsIsALoss) {
  auto [out, code] = run(args({"run", "--lease", "700ms", "--kill-after", "1s", "short", "--", "sleep", "30"}), 20s);
  EXPECT_EQ(code, kLockLost) << out;
}

TEST_F(Cli, StatusShowsHolderAndFenceAsJsonAndTable) {
  DatabaseDistributedLock holder(options_);
  holder.lock("seen");
  holder.lock("seen");
  const auto fence = holder.fencing_token("seen");
  auto [out, code] = run(args({"status", "--json"}));
  ASSERT_EQ(code, 0) << out;
  ASSERT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << "one object per line, one held lock: " << out;
  const std::string expected_prefix =
      "{\"kind\":\"lock\",\"name\":\"seen\",\"held\":true,\"machine_id\":\"" + holder.machine_id() + "\",\"host\":";
  ASSERT_EQ(out.rfind(expected_prefix, 0), 0u) << out;
  EXPECT_NE(out.find(",\"count\":2,\"fence\":" + std::to_string(fence) + ",\"acquired_at\":"), std::string::npos)
      << out;
  const auto expires = out.find("\"expires_in_ms\":");
  EXPECT_LE(std::stoll(out.substr(expires + 16)), 1500) << out;
  EXPECT_NE(out.find(",\"watchdog\":true,\"waiters\":0}\n"), std::string::npos) << out;

  std::tie(out, code) = run(args({"status", "seen", "free-one"}));
  EXPECT_EQ(code, 0);
  EXPECT_NE(out.find("NAME"), std::string::npos) << out;
  EXPECT_NE(out.find(holder.machine_id()), std::string::npos) << out;
  EXPECT_NE(out.find("free-one"), std::string::npos) << out;

  std::tie(out, code) = run(args({"status", "--json", "free-one"}));
  EXPECT_EQ(out, "{\"kind\":null,\"name\":\"free-one\",\"held\":false}\n");
  holder.unlock("seen");
  holder.unlock("seen");
  std::tie(out, code) = run(args({"status"}));
  EXPECT_NE(out.find("no lock is held"), std::string::npos) << out;
}

TEST_F(Cli, ForceUnlockOfAFreeNameFails) {
  auto [out, code] = run(args({"force-unlock", "nobody"}));
  EXPECT_EQ(code, 3) << "no table yet";
  EXPECT_NE(out.find("dlock init"), std::string::npos) << out;
  ASSERT_EQ(run(args({"init"})).second, 0);
  std::tie(out, code) = run(args({"force-unlock", "nobody"}));
  EXPECT_EQ(code, 1);
  EXPECT_NE(out.find("was not held"), std::string::npos) << out;
}

TEST_F(Cli, InitCreatesTheTableAndPrintsTheSchema) {
  auto [out, code] = run(args({"init"}));
  EXPECT_EQ(code, 0) << out;
  EXPECT_EQ(test::query_scalar("SELECT COUNT(*) FROM `" + options_.table + "`"), "0");
  std::tie(out, code) = run({"init", "--print-sql"});
  EXPECT_EQ(code, 0);
  std::ifstream in(DLOCK_SOURCE_DIR "/sql/schema.sql");
  std::stringstream schema;
  schema << in.rdbuf();
  EXPECT_NE(schema.str().find(out), std::string::npos) << "sql/schema.sql differs from `dlock init --print-sql`";
}

TEST_F(Cli, EveryBadArgumentExitsTwoBeforeTouchingTheDatabase) {
  // Nothing listens on port 1: reaching the database would be exit 3.
  const std::string dead = "mysql://u:p@127.0.0.1:1/d";
  const std::vector<std::vector<std::string>> bad = {
      {"--url", dead, "run", "--bogus", "n", "--", "true"},
      {"--url", "http://nope", "run", "n", "--", "true"},
      {"--url", "mysql://u:p@h:99999/d", "status"},
      {"--url", dead, "run", "--wait", "5 minutes", "n", "--", "true"},
      {"--url", dead, "run", "--lease", "0s", "n", "--", "true"},
      {"--url", dead, "run", "--wait", "1s", "--no-wait", "n", "--", "true"},
      {"--url", dead, "run", "", "--", "true"},
      {"--url", dead, "run", std::string(256, 'n'), "--", "true"},
      {"--url", dead, "run", "n"},
      {"--url", dead, "run", "--conflict-exit-code", "300", "n", "--", "true"},
      {"--url", dead, "status", std::string(256, 'n')},
      {"--url", dead, "force-unlock"},
      {"--url", dead, "--table", "bad-table", "status"},
      {"--url", dead, "frobnicate"},
      {"run", "n", "--", "true"},  // no URL at all
      {},
  };
  for (const auto& a : bad) {
    auto [out, code] = run(a, 20s);
    std::string shown;
    for (const auto& s : a) shown += "'" + s.substr(0, 20) + "' ";
    EXPECT_EQ(code, 2) << shown << "\n" << out;
    EXPECT_EQ(out.rfind("dlock: ", 0), 0u) << shown << "\n" << out;
    EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << "not one line: " << out;
  }
}

TEST_F(Cli, UnreachableDatabaseIsOneLineAndNonZero) {
  auto [out, code] = run({"--url", "mysql://u:p@127.0.0.1:1/d?connect_timeout_ms=1000", "status"}, 30s);
  EXPECT_EQ(code, 3) << out;
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
  EXPECT_NE(out.find("database error"), std::string::npos) << out;
}

TEST_F(Cli, HelpExplainsEverything) {
  auto [out, code] = run({"--help"});
  EXPECT_EQ(code, 0);
  for (const char* word : {"run", "status", "force-unlock", "init", "DLOCK_URL", "Exit codes"})
    EXPECT_NE(out.find(word), std::string::npos) << word;
  std::tie(out, code) = run({"run", "--help"});
  EXPECT_EQ(code, 0);
  for (const char* word : {"--wait", "--no-wait", "--lease", "--conflict-exit-code", "--kill-after", "DLOCK_FENCE"})
    EXPECT_NE(out.find(word), std::string::npos) << word;
}

}  // namespace
}  // namespace dlock

namespace dlock {
namespace {

// `dlock run` hands its command the hold's guard statement: a shell script
// guards its transaction with the mysql client, and the statement fails
// once the hold has ended.
TEST_F(Cli, RunExportsTheGuardStatementForAShellTransaction) {
  const std::string data = options_.table + "_data";
  test::execute_sql("DROP TABLE IF EXISTS `" + data + "`");
  test::execute_sql("CREATE TABLE `" + data + "` (id INT PRIMARY KEY, counter INT NOT NULL) ENGINE=InnoDB");
  test::execute_sql("INSERT INTO `" + data + "` VALUES (1, 0)");
  const std::string mysql = "mariadb --no-defaults -h" + options_.host + " -P" + std::to_string(options_.port) + " -u" +
                            options_.user + " -p" + options_.password + " " + options_.database;
  const std::string saved = file("guard.sql");
  const std::string script = mysql + " -e \"START TRANSACTION; UPDATE \\`" + data +
                             "\\` SET counter = counter + 1; $DLOCK_GUARD_SQL; COMMIT\" && printf '%s' \"$DLOCK_GUARD_SQL\" > " +
                             saved;
  auto [out, code] = run(args({"run", "-c", script, "account"}));
  ASSERT_EQ(code, 0) << out;
  EXPECT_EQ(test::query_scalar("SELECT counter FROM `" + data + "` WHERE id = 1"), "1");
  const std::string guard = slurp(saved);
  ASSERT_NE(guard.find("UPDATE"), std::string::npos) << guard;
  // The hold is gone: the same transaction now fails and changes nothing.
  std::ofstream(file("again.sql")) << "START TRANSACTION; UPDATE `" << data << "` SET counter = counter + 1; " << guard
                                   << "; COMMIT;\n";
  std::tie(out, code) = run_program("/bin/sh", {"-c", mysql + " < " + file("again.sql")});
  EXPECT_NE(code, 0) << out;
  EXPECT_NE(out.find("1242"), std::string::npos) << out;
  EXPECT_EQ(test::query_scalar("SELECT counter FROM `" + data + "` WHERE id = 1"), "1");
}

}  // namespace
}  // namespace dlock
