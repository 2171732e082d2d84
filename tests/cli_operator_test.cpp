// The dlock command for people used to flock(1) and for operators: flock's
// options and argument shape, --version, names that are not ASCII, IPv6
// URLs, passwords kept out of the command line, and status/conflict
// messages that say who holds a lock.
#include <dlock/dlock.hpp>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <signal.h>
#include <stdlib.h>

#include <fstream>
#include <future>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "child_process.hpp"
#include "cli_fixture.hpp"
#include "test_env.hpp"
#include "base/identity.hpp"

namespace dlock {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using test::ChildProcess;
using test::Cli;

// The URL's password, taken out (the URL is mysql://user:password@...).
std::pair<std::string, std::string> split_password(const std::string& url) {
  const auto colon = url.find(':', url.find("//") + 2);
  const auto at = url.find('@');
  return {url.substr(0, colon) + url.substr(at), url.substr(colon + 1, at - colon - 1)};
}

TEST_F(Cli, FlockShapeEverythingAfterTheNameIsTheCommand) {
  auto [out, code] = run(args({"run", "x", "ls", "-d", dir_}));
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find(dir_), std::string::npos) << "ls -d did not run: " << out;
  std::tie(out, code) = run(args({"run", "x", "--", "sh", "-c", "exit 5"}));
  EXPECT_EQ(code, 5) << out;
  std::tie(out, code) = run(args({"run", "-c", "echo shell:$DLOCK_NAME; exit 6", "x"}));
  EXPECT_EQ(code, 6) << out;
  EXPECT_NE(out.find("shell:x"), std::string::npos) << out;
  // `--` before any name: a usage error, and no lock named "ls" is taken.
  std::tie(out, code) = run(args({"run", "--", "ls", "-l"}));
  EXPECT_EQ(code, 2) << out;
  DatabaseDistributedLock client(options_);
  EXPECT_EQ(client.remaining_ttl("ls"), std::nullopt);
  std::tie(out, code) = run(args({"run", "x"}));
  EXPECT_EQ(code, 2) << out;
  std::tie(out, code) = run(args({"run", "-c", "true", "x", "extra"}));
  EXPECT_EQ(code, 2) << out;
}

TEST_F(Cli, FlockOptionsNonblockWaitSecondsAndConflictCode) {
  DatabaseDistributedLock holder(options_);
  holder.lock("busy");
  auto [out, code] = run(args({"run", "-n", "busy", "true"}));
  EXPECT_EQ(code, 1) << out;
  std::tie(out, code) = run(args({"run", "--nonblock", "-E", "42", "busy", "true"}));
  EXPECT_EQ(code, 42) << out;
  auto start = Clock::now();
  std::tie(out, code) = run(args({"run", "-w", "0.5", "busy", "true"}));
  EXPECT_EQ(code, 1) << out;
  EXPECT_GE(Clock::now() - start, 500ms);
  EXPECT_LT(Clock::now() - start, 5s);
  start = Clock::now();
  std::tie(out, code) = run(args({"run", "--wait", "1", "busy", "true"}));
  EXPECT_EQ(code, 1) << out;
  EXPECT_GE(Clock::now() - start, 1s);
  holder.unlock("busy");
  std::tie(out, code) = run(args({"run", "-w", "1m30s", "busy", "true"}));
  EXPECT_EQ(code, 0) << out;
}

TEST_F(Cli, VersionAndHelpNameTheExitCodes) {
  auto [out, code] = run({"--version"});
  EXPECT_EQ(code, 0);
  EXPECT_EQ(out, std::string("dlock ") + DLOCK_VERSION_STRING + "\n");
  std::tie(out, code) = run({"--help"});
  EXPECT_EQ(code, 0);
  EXPECT_NE(out.find("126"), std::string::npos) << out;
  EXPECT_NE(out.find("127"), std::string::npos) << out;
  std::tie(out, code) = run(args({"run", "x", "/nonexistent/command"}));
  EXPECT_EQ(code, 127) << out;
  std::tie(out, code) = run(args({"run", "x", "/etc/hostname"}));
  EXPECT_EQ(code, 126) << out;
}

TEST_F(Cli, StatusAndConflictsSayWhoHoldsTheLock) {
  Options o = options_;
  o.machine_id = "label-x";
  DatabaseDistributedLock holder(o);
  holder.lock("who", 30s);
  const std::string host = details::host_name();
  auto [out, code] = run(args({"status"}));
  EXPECT_EQ(code, 0) << out;
  for (const std::string& part : {std::string("label-x"), host, std::to_string(::getpid()), std::string("fixed")})
    EXPECT_NE(out.find(part), std::string::npos) << part << " missing from:\n" << out;
  std::tie(out, code) = run(args({"status", "--json", "who"}));
  const auto j = nlohmann::json::parse(out);
  EXPECT_EQ(j["machine_id"], "label-x");
  EXPECT_EQ(j["host"], host);
  EXPECT_EQ(j["pid"], ::getpid());
  EXPECT_TRUE(j["acquired_at"].get<std::string>().find('T') != std::string::npos) << out;
  EXPECT_GE(j["held_for_ms"].get<long>(), 0);
  EXPECT_FALSE(j["watchdog"].get<bool>());
  std::tie(out, code) = run(args({"run", "-n", "who", "true"}));
  EXPECT_EQ(code, 1);
  EXPECT_NE(out.find("held by label-x (host " + host + ", pid " + std::to_string(::getpid())), std::string::npos)
      << out;
  holder.unlock("who");
}

TEST_F(Cli, NonAsciiNamesRoundTripThroughStatusJsonAndForceUnlock) {
  DatabaseDistributedLock holder(options_);
  const std::string utf8 = "caf\xc3\xa9-\xe2\x98\x95 \"q\"";
  const std::string bytes = std::string("\xff\xfe-raw", 6);
  holder.lock(utf8);
  holder.lock(bytes);
  auto [out, code] = run(args({"status", "--json"}));
  EXPECT_EQ(code, 0) << out;
  std::istringstream lines(out);
  std::string line, copied_name, copied_hex;
  int n = 0;
  while (std::getline(lines, line)) {
    const auto j = nlohmann::json::parse(line);  // throws (fails) on invalid JSON
    ++n;
    if (j.contains("name_hex")) {
      copied_hex = j["name_hex"];
    } else {
      copied_name = j["name"];
      EXPECT_NE(line.find("caf\xc3\xa9-\xe2\x98\x95"), std::string::npos) << "UTF-8 was escaped: " << line;
    }
  }
  EXPECT_EQ(n, 2);
  EXPECT_EQ(copied_name, utf8);
  EXPECT_EQ(copied_hex, "fffe2d726177");
  // The table shows the UTF-8 name as it is.
  std::tie(out, code) = run(args({"status"}));
  EXPECT_NE(out.find("caf\xc3\xa9-\xe2\x98\x95"), std::string::npos) << out;
  // What was copied from the JSON works with force-unlock.
  std::tie(out, code) = run(args({"force-unlock", copied_name}));
  EXPECT_EQ(code, 0) << out;
  std::tie(out, code) = run(args({"force-unlock", "--hex", copied_hex}));
  EXPECT_EQ(code, 0) << out;
  DatabaseDistributedLock check(options_);
  EXPECT_FALSE(check.is_locked(utf8));
  EXPECT_FALSE(check.is_locked(bytes));
  std::tie(out, code) = run(args({"force-unlock", "--hex", "zz"}));
  EXPECT_EQ(code, 2) << out;
}

TEST_F(Cli, Ipv6LoopbackUrl) {
  std::ifstream inet6("/proc/net/if_inet6");
  std::string all((std::istreambuf_iterator<char>(inet6)), std::istreambuf_iterator<char>());
  if (all.find("00000000000000000000000000000001") == std::string::npos) GTEST_SKIP() << "no IPv6 loopback here";
  std::string url = url_;
  const auto host = url.find("127.0.0.1");
  ASSERT_NE(host, std::string::npos) << url;
  url.replace(host, 9, "[::1]");
  auto [out, code] = run({"--url", url, "run", "v6", "true"});
  EXPECT_EQ(code, 0) << out;
  std::tie(out, code) = run({"--url", url, "status", "--json", "v6"});
  EXPECT_EQ(code, 0) << out;
  EXPECT_EQ(nlohmann::json::parse(out)["name"], "v6") << "the status read over IPv6 too";
}

TEST_F(Cli, PasswordFromTheEnvironmentOrAFileNotTheCommandLine) {
  const auto [bare_url, password] = split_password(url_);
  ASSERT_FALSE(password.empty());
  auto [out, code] = run({"--url", bare_url, "run", "pw", "true"});
  EXPECT_EQ(code, 3) << "connected without a password?\n" << out;
  ::setenv("DLOCK_PASSWORD", password.c_str(), 1);
  std::tie(out, code) = run({"--url", bare_url, "run", "pw", "true"});
  ::unsetenv("DLOCK_PASSWORD");
  EXPECT_EQ(code, 0) << out;
  const std::string file = this->file("password");
  std::ofstream(file) << password << "\n";
  std::tie(out, code) = run({"--url", bare_url, "--password-file", file, "run", "pw", "true"});
  EXPECT_EQ(code, 0) << out;
  std::tie(out, code) = run({"--url", bare_url, "--password-file", this->file("missing"), "run", "pw", "true"});
  EXPECT_EQ(code, 2) << out;
}

TEST_F(Cli, VerboseOutputHasOnePrefixAndNoEscapeCodesInAPipe) {
  auto [out, code] = run(args({"-v", "run", "verbose", "true"}));
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("dlock: "), std::string::npos) << out;
  EXPECT_EQ(out.find("[dlock]"), std::string::npos) << out;
  EXPECT_EQ(out.find("\x1b["), std::string::npos) << "escape codes in a pipe:\n" << out;
}

}  // namespace
}  // namespace dlock

namespace dlock {
namespace {

TEST_F(Cli, RunWithPermitsHoldsOneSemaphorePermit) {
  Options o = options_;
  o.machine_id = "sem-holder";
  DatabaseDistributedLock holder(o);
  Semaphore s = holder.get_semaphore("jobs", 2);
  Permit first = s.acquire();

  // One permit left: the command gets it, with its slot and the slot's token.
  auto [out, code] = run(args({"run", "--permits", "2", "jobs", "sh", "-c", "echo slot=$DLOCK_SLOT fence=$DLOCK_FENCE"}));
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("slot=1 fence="), std::string::npos) << out;
  EXPECT_EQ(s.available_permits(), 1u) << "the command's permit was released";

  // The lock of the same name is another namespace.
  std::tie(out, code) = run(args({"run", "-n", "jobs", "true"}));
  EXPECT_EQ(code, 0) << out;

  // Every permit held: a conflict, naming the semaphore.
  Permit second = s.acquire();
  std::tie(out, code) = run(args({"run", "-n", "--permits", "2", "jobs", "true"}));
  EXPECT_EQ(code, 1) << out;
  EXPECT_NE(out.find("semaphore jobs is held by 2 permit holder(s) (bound 2)"), std::string::npos) << out;
  std::tie(out, code) = run(args({"run", "--permits", "0", "jobs", "true"}));
  EXPECT_EQ(code, 2) << "a bound outside 1..100000 is a usage error: " << out;

  // status lists it, in text and JSON.
  std::tie(out, code) = run(args({"status"}));
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("semaphore 0/2"), std::string::npos) << out;
  EXPECT_NE(out.find("semaphore 1/2"), std::string::npos) << out;
  EXPECT_NE(out.find("sem-holder"), std::string::npos) << out;
  std::tie(out, code) = run(args({"status", "--json", "jobs"}));
  EXPECT_EQ(code, 0) << out;
  std::istringstream lines(out);
  std::string line;
  int permits = 0;
  while (std::getline(lines, line)) {
    const auto j = nlohmann::json::parse(line);
    if (j["kind"] != "semaphore") continue;
    EXPECT_EQ(j["name"], "jobs");
    EXPECT_EQ(j["slot"], permits);
    EXPECT_EQ(j["bound"], 2);
    EXPECT_EQ(j["machine_id"], "sem-holder");
    EXPECT_TRUE(j["watchdog"].get<bool>());
    ++permits;
  }
  EXPECT_EQ(permits, 2) << "one line per permit: " << out;

  // force-unlock --semaphore frees every permit; the holders learn at release.
  std::tie(out, code) = run(args({"force-unlock", "--semaphore", "jobs"}));
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("freed 2 permit(s) of semaphore jobs"), std::string::npos) << out;
  EXPECT_EQ(s.available_permits(), 2u);
  std::tie(out, code) = run(args({"force-unlock", "--semaphore", "jobs"}));
  EXPECT_EQ(code, 1) << "nothing to free: " << out;
}

// Fair lock `name` held by a client labelled fair-holder, and an owner of a
// client labelled fair-waiter queued behind it (waiting up to 20 s).
struct QueuedFairLock {
  QueuedFairLock(const Options& base, const std::string& name, std::chrono::milliseconds waiter_poll)
      : holder(labelled(base, "fair-holder", base.poll_interval)),
        held(holder.get_fair_lock(name, Owner::create())),
        waiter(labelled(base, "fair-waiter", waiter_poll)),
        queued(waiter.get_fair_lock(name, Owner::create())) {
    held.lock();
    waiting = std::async(std::launch::async, [this] { return queued.try_lock_for(20s); });
    queued_now = test::wait_until(
        [&] {
          return test::query_scalar("SELECT COUNT(*) FROM `" + base.table +
                                    "` WHERE kind = 5 AND slot > 0 AND intent_expire > NOW(6)") == "1";
        },
        10s);
  }
  static Options labelled(Options o, const std::string& label, std::chrono::milliseconds poll) {
    o.machine_id = label;
    o.poll_interval = poll;
    return o;
  }
  DatabaseDistributedLock holder;
  Lock held;
  DatabaseDistributedLock waiter;
  Lock queued;
  std::future<bool> waiting;
  bool queued_now = false;
};

TEST_F(Cli, RunFairHoldsAFairLockAndStatusShowsItsQueue) {
  QueuedFairLock jobs(options_, "jobs", options_.poll_interval);
  ASSERT_TRUE(jobs.queued_now);
  // A try neither overtakes the waiter nor touches the plain lock "jobs".
  auto [out, code] = run(args({"run", "-n", "--fair", "jobs", "true"}));
  EXPECT_EQ(code, 1) << out;
  EXPECT_NE(out.find("fair lock jobs is held by fair-holder"), std::string::npos) << out;
  EXPECT_EQ(run(args({"run", "-n", "jobs", "true"})).second, 0) << "the plain lock of the same name is another";
  EXPECT_EQ(run(args({"run", "--fair", "-x", "jobs", "true"})).second, 2);

  std::tie(out, code) = run(args({"status"}));
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("WAITING FOR"), std::string::npos) << out;
  EXPECT_NE(out.find("fair-waiter"), std::string::npos) << out;
  std::tie(out, code) = run(args({"status", "--json", "jobs"}));
  EXPECT_EQ(code, 0) << out;
  std::istringstream lines(out);
  std::string line;
  bool held = false, waiting = false;
  while (std::getline(lines, line)) {
    const auto j = nlohmann::json::parse(line);
    if (j["kind"] != "fair") continue;
    EXPECT_EQ(j["name"], "jobs");
    if (j.contains("held")) {
      held = true;
      EXPECT_EQ(j["machine_id"], "fair-holder");
      EXPECT_EQ(j["waiters"], 1);
    } else {
      waiting = true;
      EXPECT_EQ(j["waiting"], true);
      EXPECT_EQ(j["position"], 1);
      EXPECT_EQ(j["machine_id"], "fair-waiter");
    }
  }
  EXPECT_TRUE(held && waiting) << out;
  jobs.held.unlock();  // granted to the waiter
  EXPECT_TRUE(jobs.waiting.get());
  jobs.queued.unlock();

  // Once nobody waits, --fair runs the command with the fair lock's token.
  std::tie(out, code) = run(args({"run", "-n", "--fair", "jobs", "sh", "-c", "echo fence=$DLOCK_FENCE"}));
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("fence=3"), std::string::npos) << "holder 1, waiter 2, this run 3: " << out;
}

TEST_F(Cli, ForceUnlockFairClearsTheHolderAndItsFirstWaiterGoesNext) {
  // Nothing rings at a forced release: the waiter's poll finds it free.
  QueuedFairLock stuck(options_, "stuck", 500ms);
  ASSERT_TRUE(stuck.queued_now);
  EXPECT_EQ(run(args({"force-unlock", "stuck"})).second, 1) << "the plain lock of the same name is another";

  auto [out, code] = run(args({"force-unlock", "--fair", "stuck"}));
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("cleared fair lock stuck (it was held by fair-holder"), std::string::npos) << out;
  EXPECT_TRUE(stuck.waiting.get()) << "the queued waiter never got the forced fair lock";
  EXPECT_EQ(stuck.queued.fencing_token(), 2u);
  stuck.queued.unlock();
  stuck.held.unlock();  // found lost; returns normally
  std::tie(out, code) = run(args({"force-unlock", "--fair", "stuck"}));
  EXPECT_EQ(code, 1) << out;
  EXPECT_NE(out.find("fair lock stuck was not held"), std::string::npos) << out;
  EXPECT_EQ(run(args({"force-unlock", "--fair", "--election", "stuck"})).second, 2);
}

TEST_F(Cli, ForceUnlockElectionEndsTheLeadership) {
  Options o = options_;
  o.machine_id = "the-leader";
  DatabaseDistributedLock leader_client(o);
  Election e = leader_client.get_election("svc", Owner::create());
  const std::uint64_t term = e.campaign("v1");
  const LeaderView before = e.leader();
  ASSERT_TRUE(before.leader.has_value());

  auto [out, code] = run(args({"force-unlock", "--election", "svc"}));
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("cleared election svc (it was held by the-leader"), std::string::npos) << out;
  const LeaderView after = e.leader();
  EXPECT_FALSE(after.leader.has_value());
  EXPECT_GT(after.revision, before.revision) << "observers see the leadership end";
  DatabaseDistributedLock candidate_client(options_);
  Election candidate = candidate_client.get_election("svc", Owner::create());
  const auto next_term = candidate.try_campaign("v2", 10s);
  ASSERT_TRUE(next_term.has_value()) << "no candidate could take the forced election";
  EXPECT_GT(*next_term, term);
  candidate.resign();
  e.resign();  // found lost; never throws
  std::tie(out, code) = run(args({"force-unlock", "--election", "svc"}));
  EXPECT_EQ(code, 1) << out;
  EXPECT_NE(out.find("election svc was not held"), std::string::npos) << out;
}

TEST_F(Cli, RunSharedAndExclusiveHoldTheSidesOfAReadWriteLock) {
  Options o = options_;
  o.machine_id = "rw-holder";
  DatabaseDistributedLock holder(o);
  ReadWriteLock rw = holder.get_read_write_lock("catalog", Owner::create());
  rw.lock_shared();

  // Reads share: --shared runs beside another reader, with a read token.
  auto [out, code] = run(args({"run", "-n", "--shared", "catalog", "sh", "-c", "echo fence=$DLOCK_FENCE"}));
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("fence=1"), std::string::npos) << "a read before any write gets token 1: " << out;
  // A write does not: a conflict naming the read-write lock and its readers.
  std::tie(out, code) = run(args({"run", "-n", "-x", "catalog", "true"}));
  EXPECT_EQ(code, 1) << out;
  EXPECT_NE(out.find("read-write lock catalog is held by 1 reader(s)"), std::string::npos) << out;
  // The mutex of the same name is another namespace.
  std::tie(out, code) = run(args({"run", "-n", "catalog", "true"}));
  EXPECT_EQ(code, 0) << out;
  EXPECT_EQ(run(args({"run", "-s", "-x", "catalog", "true"})).second, 2) << "one side at a time";
  EXPECT_EQ(run(args({"run", "-s", "--permits", "2", "catalog", "true"})).second, 2);

  // status lists the readers, in text and JSON.
  std::tie(out, code) = run(args({"status"}));
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("read"), std::string::npos) << out;
  EXPECT_NE(out.find("rw-holder"), std::string::npos) << out;
  std::tie(out, code) = run(args({"status", "--json", "catalog"}));
  EXPECT_EQ(code, 0) << out;
  std::istringstream lines(out);
  std::string line;
  int readers = 0;
  while (std::getline(lines, line)) {
    const auto j = nlohmann::json::parse(line);
    EXPECT_NE(j["kind"], "write") << "nobody writes: " << line;
    if (j["kind"] != "read") continue;
    ++readers;
    EXPECT_EQ(j["name"], "catalog");
    EXPECT_EQ(j["machine_id"], "rw-holder");
  }
  EXPECT_EQ(readers, 1) << out;

  // A waiting --exclusive goes when the reader releases; its command sees
  // the write token.
  ChildProcess writer(test::cli_path(), args({"run", "-x", "-w", "30", "catalog", "sh", "-c", "echo wrote=$DLOCK_FENCE"}),
                      true);
  EXPECT_FALSE(writer.wait_for_line("wrote=", 500ms)) << "wrote while a reader read";
  rw.unlock_shared();
  EXPECT_TRUE(writer.wait_for_line("wrote=2", 10s));

  // force-unlock clears each side.
  rw.lock();
  std::tie(out, code) = run(args({"force-unlock", "--shared", "catalog"}));
  EXPECT_EQ(code, 1) << "no read hold to clear: " << out;
  std::tie(out, code) = run(args({"force-unlock", "--exclusive", "catalog"}));
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("cleared the write hold of read-write lock catalog"), std::string::npos) << out;
  rw.unlock();  // found lost; returns normally
  rw.lock_shared();
  std::tie(out, code) = run(args({"force-unlock", "--read-write", "catalog"}));
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("cleared 1 read hold(s)"), std::string::npos) << out;
  EXPECT_TRUE(holder.get_read_write_lock("catalog").try_lock()) << "no read left behind";
  holder.get_read_write_lock("catalog").unlock();
  rw.unlock_shared();
}

TEST_F(Cli, InitCreatesAndPrintsTheTable) {
  auto [out, code] = run(args({"init", "--print-sql"}));
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("CREATE TABLE IF NOT EXISTS `" + options_.table + "`"), std::string::npos) << out;
  EXPECT_NE(out.find("dlock schema 3"), std::string::npos) << out;
  test::execute_sql("DROP TABLE IF EXISTS `" + options_.table + "`");
  std::tie(out, code) = run(args({"init"}));
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("created"), std::string::npos) << out;
  EXPECT_EQ(test::query_scalar("SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND "
                               "TABLE_NAME = '" + options_.table + "' AND TABLE_COMMENT LIKE 'dlock schema 3%'"),
            "1");
  std::tie(out, code) = run(args({"init"}));
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("ready"), std::string::npos) << out;
}

}  // namespace
}  // namespace dlock
