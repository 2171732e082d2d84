// Election (get_election): one leader per name, terms that fence, values
// and revisions, observers that see every change, leadership lost and
// reported like a lock; candidates and observers in separate processes.
#include <dlock/asio.hpp>
#include <dlock/dlock.hpp>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <boost/asio/use_future.hpp>

#include <algorithm>
#include <atomic>
#include <future>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
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
using test::slow_poll;
using test::url_for;
using test::wait_until;

std::vector<std::string> words(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

TEST(Election, OneLeaderAtATimeWithGrowingTerms) {
  const Options o = fresh_options();
  DatabaseDistributedLock a(o), b(same_table(o));
  Election ea = a.get_election("svc", Owner::create());
  Election eb = b.get_election("svc", Owner::create());
  EXPECT_EQ(ea.leader().revision, 0u) << "an election never campaigned for";
  EXPECT_FALSE(ea.leader().leader.has_value());
  const std::uint64_t t1 = ea.campaign("a:1");
  EXPECT_GT(t1, 0u);
  EXPECT_TRUE(ea.is_leader());
  EXPECT_FALSE(eb.is_leader());
  EXPECT_FALSE(eb.try_campaign("b:1", 0ms).has_value()) << "two leaders at once";
  EXPECT_FALSE(eb.try_campaign("b:1", 300ms).has_value()) << "two leaders at once";
  const LeaderView v = eb.leader();
  ASSERT_TRUE(v.leader.has_value());
  EXPECT_EQ(v.leader->value, "a:1");
  EXPECT_EQ(v.leader->term, t1);
  EXPECT_EQ(v.leader->pid, static_cast<std::uint32_t>(::getpid()));
  EXPECT_FALSE(v.leader->host.empty());
  ea.resign();
  EXPECT_FALSE(ea.is_leader());
  const auto t2 = eb.try_campaign("b:1", 5s);
  ASSERT_TRUE(t2.has_value());
  EXPECT_GT(*t2, t1) << "a later term must be greater";
  EXPECT_EQ(ea.leader().leader->value, "b:1");
  EXPECT_GT(ea.leader().revision, v.revision);
  eb.resign();
  eb.resign();  // idempotent
  EXPECT_FALSE(ea.leader().leader.has_value());
}

TEST(Election, CampaignByTheLeaderReturnsItsTermAndOneResignEndsIt) {
  const Options o = fresh_options();
  DatabaseDistributedLock a(o), b(same_table(o));
  Election e = a.get_election("svc");
  const std::uint64_t t = e.campaign("x");
  EXPECT_EQ(e.campaign("y"), t);
  EXPECT_EQ(*e.try_campaign("z", 0ms), t);
  EXPECT_EQ(e.leader().leader->value, "x") << "a campaign of the leader changed the value";
  e.resign();
  EXPECT_FALSE(e.is_leader());
  EXPECT_TRUE(b.get_election("svc").try_campaign("b", 0ms).has_value()) << "still led after one resign()";
}

TEST(Election, ProclaimChangesValueAndRevisionNotTerm) {
  const Options o = fresh_options();
  DatabaseDistributedLock a(o);
  Election e = a.get_election("svc");
  EXPECT_THROW(e.proclaim("v"), NotHeldError);
  const std::uint64_t t = e.campaign("v1");
  const LeaderView before = e.leader();
  e.proclaim("v2");
  const LeaderView after = e.leader();
  ASSERT_TRUE(after.leader.has_value());
  EXPECT_EQ(after.leader->value, "v2");
  EXPECT_EQ(after.leader->term, t);
  EXPECT_GT(after.revision, before.revision);
  // Bytes, not text: zeros and high bytes survive; 64 KiB is the limit.
  const std::string bytes("a\0b\xff\x01", 5);
  e.proclaim(bytes);
  EXPECT_EQ(e.leader().leader->value, bytes);
  const std::string largest(64 * 1024, 'x');
  e.proclaim(largest);
  EXPECT_EQ(e.leader().leader->value, largest);
  const std::uint64_t revision = e.leader().revision;
  EXPECT_THROW(e.proclaim(std::string(64 * 1024 + 1, 'x')), std::invalid_argument);
  EXPECT_EQ(e.leader().revision, revision) << "a refused value changed the election";
  Election other = a.get_election("svc2");
  EXPECT_THROW((void)other.campaign(std::string(64 * 1024 + 1, 'x')), std::invalid_argument);
  EXPECT_EQ(other.leader().revision, 0u) << "a refused campaign wrote a row";
  EXPECT_THROW((void)a.get_election(""), std::invalid_argument);
  e.resign();
}

TEST(Election, ObserveReturnsAtOnceOrAfterTheWait) {
  const Options o = fresh_options();
  DatabaseDistributedLock a(o);
  Election e = a.get_election("svc");
  EXPECT_FALSE(e.observe(0, 0ms).has_value()) << "nothing to see yet";
  const auto started = Clock::now();
  EXPECT_FALSE(e.observe(0, 300ms).has_value());
  EXPECT_GE(Clock::now() - started, 300ms) << "gave up early";
  (void)e.campaign("v");
  const auto v = e.observe(0, 0ms);
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->leader->value, "v");
  EXPECT_FALSE(e.observe(v->revision, 200ms).has_value()) << "no change, yet observe returned";
  e.resign();
}

// Every change made in this client wakes its observers at once, with a
// poll too slow to explain it.
TEST(Election, ObserversHereSeeTakesProclaimsAndResignsAtOnce) {
  const Options o = slow_poll(fresh_options());
  DatabaseDistributedLock a(o);
  Election leader = a.get_election("svc", Owner::create());
  Election follower = a.get_election("svc", Owner::create());
  std::uint64_t seen = follower.leader().revision;
  const auto next = [&](std::uint64_t after) {
    return std::async(std::launch::async, [&follower, after] { return follower.observe(after, 10s); });
  };
  auto f = next(seen);
  std::this_thread::sleep_for(50ms);  // let it wait (not needed for correctness)
  const auto t0 = Clock::now();
  const std::uint64_t term = leader.campaign("one");
  auto v = f.get();
  ASSERT_TRUE(v.has_value());
  EXPECT_LT(Clock::now() - t0, 2s);
  ASSERT_TRUE(v->leader.has_value());
  EXPECT_EQ(v->leader->term, term);
  seen = v->revision;
  f = next(seen);
  leader.proclaim("two");
  v = f.get();
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->leader->value, "two");
  seen = v->revision;
  f = next(seen);
  const auto t1 = Clock::now();
  leader.resign();
  v = f.get();
  ASSERT_TRUE(v.has_value());
  EXPECT_LT(Clock::now() - t1, 2s);
  EXPECT_FALSE(v->leader.has_value());
  EXPECT_GT(v->revision, seen);
}

// A proclaim and a resign in another client reach an observer at the
// change (fast wake-up), not at its 30 s poll.
TEST(Election, ObserversElsewhereSeeProclaimAndResignAtTheChange) {
  if (!test::fast_wakeup_enabled()) GTEST_SKIP() << "fast wake-up is off";
  const Options o = slow_poll(fresh_options());
  DatabaseDistributedLock a(o), b(same_table(o));
  Election leader = a.get_election("svc", Owner::create());
  Election follower = b.get_election("svc");
  (void)leader.campaign("one");
  const std::uint64_t seen = follower.leader().revision;
  auto f = std::async(std::launch::async, [&] { return follower.observe(seen, 20s); });
  // Its bell is armed once the observer has looked; give it that moment.
  ASSERT_EQ(f.wait_for(300ms), std::future_status::timeout);
  const auto t0 = Clock::now();
  leader.proclaim("two");
  auto v = f.get();
  ASSERT_TRUE(v.has_value());
  EXPECT_LT(Clock::now() - t0, 5s) << "the proclaim waited for the poll";
  EXPECT_EQ(v->leader->value, "two");
  const std::uint64_t seen2 = v->revision;
  f = std::async(std::launch::async, [&] { return follower.observe(seen2, 20s); });
  ASSERT_EQ(f.wait_for(300ms), std::future_status::timeout);
  const auto t1 = Clock::now();
  leader.resign();
  v = f.get();
  ASSERT_TRUE(v.has_value());
  EXPECT_LT(Clock::now() - t1, 5s) << "the resign waited for the poll";
  EXPECT_FALSE(v->leader.has_value());
}

// A handover between two other clients (resign, and a candidate that
// waited takes over at once) reaches an observer in a third client at the
// change, with a poll too slow to explain it: the resign rings, and the
// take that follows is looked for right after.
TEST(Election, AHandoverElsewhereReachesAnObserverAtOnce) {
  if (!test::fast_wakeup_enabled()) GTEST_SKIP() << "fast wake-up is off";
  const Options o = slow_poll(fresh_options());
  DatabaseDistributedLock a(o), b(same_table(o)), c(same_table(o));
  Election first = a.get_election("svc", Owner::create());
  Election second = b.get_election("svc", Owner::create());
  Election follower = c.get_election("svc");
  const std::uint64_t t1 = first.campaign("a");
  auto next = std::async(std::launch::async, [&] { return second.try_campaign("b", 20s); });
  ASSERT_EQ(next.wait_for(300ms), std::future_status::timeout);
  const std::uint64_t seen = follower.leader().revision;
  auto observed = std::async(std::launch::async, [&] {
    // Until the second leader (the gap between may be seen, or not).
    std::uint64_t after = seen;
    for (;;) {
      const auto v = follower.observe(after, 20s);
      if (!v || (v->leader && v->leader->term != t1)) return v;
      after = v->revision;
    }
  });
  ASSERT_EQ(observed.wait_for(300ms), std::future_status::timeout);  // its bell armed
  const auto t0 = Clock::now();
  first.resign();
  const auto v = observed.get();
  EXPECT_LT(Clock::now() - t0, 5s) << "the new leader was seen at the poll";
  ASSERT_TRUE(v.has_value());
  const auto t2 = next.get();
  ASSERT_TRUE(t2.has_value());
  EXPECT_EQ(v->leader->term, *t2);
  second.resign();
}

// A new leader in another client after a time without one is seen at the
// latest at the poll (with fast wake-up off nothing else tells of it).
TEST(Election, ANewLeaderElsewhereIsSeenAtThePoll) {
  const Options o = fresh_options();  // 200 ms poll
  DatabaseDistributedLock a(o), b(same_table(o));
  Election follower = a.get_election("svc");
  Election candidate = b.get_election("svc");
  auto f = std::async(std::launch::async, [&] { return follower.observe(0, 20s); });
  ASSERT_EQ(f.wait_for(300ms), std::future_status::timeout);
  const std::uint64_t term = candidate.campaign("b");
  const auto t0 = Clock::now();
  const auto v = f.get();
  EXPECT_LT(Clock::now() - t0, 5s) << "not seen at the poll";
  ASSERT_TRUE(v.has_value());
  ASSERT_TRUE(v->leader.has_value());
  EXPECT_EQ(v->leader->term, term);
  candidate.resign();
}

// The count of observer rows parked on `name` (primitives/election/election_rows.hpp).
std::string parked_observers(const Options& o, const std::string& name, bool live_only = true) {
  return test::query_scalar("SELECT COUNT(*) FROM `" + o.table + "` WHERE kind = 7 AND lock_name = '" + name + "'" +
                            (live_only ? " AND expire_time > NOW(6)" : ""));
}

// With fast wake-up, a leader elected in another client long after the
// last one ended (or the first ever) reaches observers at the take itself:
// their bell watchers park a session each, which the take interrupts. A
// 30 s poll cannot explain it.
TEST(Election, ANewLeaderAfterAVacancyReachesObserversElsewhereAtOnce) {
  if (!test::fast_wakeup_enabled()) GTEST_SKIP() << "fast wake-up is off";
  const Options o = slow_poll(fresh_options());
  DatabaseDistributedLock a(o), b(same_table(o)), c(same_table(o));
  Election candidate = c.get_election("svc", Owner::create());
  for (const bool ever_campaigned : {false, true}) {
    SCOPED_TRACE(ever_campaigned ? "after a resign" : "the first leader ever");
    const std::uint64_t seen = a.get_election("svc").leader().revision;
    std::vector<std::future<std::optional<LeaderView>>> observers;
    for (DatabaseDistributedLock* client : {&a, &b})
      observers.push_back(std::async(std::launch::async, [client, seen] {
        return client->get_election("svc").observe(seen, 20s);
      }));
    // Both parked, and past the short re-reads after a leadership ends.
    ASSERT_TRUE(wait_until([&] { return parked_observers(o, "svc") == "2"; }, 10s));
    std::this_thread::sleep_for(300ms);
    for (auto& f : observers) ASSERT_EQ(f.wait_for(0ms), std::future_status::timeout) << "woken with no change";
    const auto t0 = Clock::now();
    const std::uint64_t term = candidate.campaign("c");
    for (auto& f : observers) {
      ASSERT_EQ(f.wait_for(5s), std::future_status::ready) << "the new leader was not seen at the take";
      const auto v = f.get();
      ASSERT_TRUE(v.has_value());
      ASSERT_TRUE(v->leader.has_value());
      EXPECT_EQ(v->leader->term, term);
    }
    EXPECT_LT(Clock::now() - t0, 5s);
    EXPECT_TRUE(wait_until([&] { return parked_observers(o, "svc", false) == "0"; }, 10s))
        << "the take leaves no observer row behind";
    candidate.resign();
  }
}

// An observer that starts on an election nobody ever used, a moment before
// its first campaign: the campaign may land before the observer's wait is
// in place, and is seen at once all the same (the short re-reads cover an
// election without a row too), not at the poll.
TEST(Election, AnObserverOfANeverUsedElectionSeesItsFirstLeaderAtOnce) {
  if (!test::fast_wakeup_enabled()) GTEST_SKIP() << "fast wake-up is off";
  const Options o = slow_poll(fresh_options());
  DatabaseDistributedLock observers(o), candidates(same_table(o));
  for (int i = 0; i < 16; ++i) {
    const std::string name = "fresh" + std::to_string(i);
    auto seen = std::async(std::launch::async, [&] { return observers.get_election(name).observe(0, 20s); });
    std::this_thread::sleep_for(std::chrono::microseconds(200 * i));  // 0-3 ms after the observer starts
    const std::uint64_t term = candidates.get_election(name, Owner::create()).campaign("v");
    ASSERT_EQ(seen.wait_for(3s), std::future_status::ready) << name << ": the first leader was left to the poll";
    const auto view = seen.get();
    ASSERT_TRUE(view.has_value());
    // The first change it saw: the leader, or (a take in between) a later one.
    if (view->leader) {
      EXPECT_GE(view->leader->term, term);
    }
  }
}

// A client that died while its observer was parked leaves a row; the next
// take removes it, and a parked row never counts as a hold.
TEST(Election, AParkedObserverRowIsNoHoldAndGoesWithTheNextTake) {
  const Options o = fresh_options();
  DatabaseDistributedLock a(o);
  test::execute_sql("INSERT INTO `" + o.table + "` (kind, lock_name, slot, hold_id, bell, expire_time) VALUES "
                    "(7, 'svc', 42, 7, 'dlock-observer-gone', NOW(6) + INTERVAL 1 HOUR), "
                    "(7, 'svc', 43, 8, 'dlock-observer-dead', NOW(6) - INTERVAL 1 SECOND)");
  EXPECT_EQ(a.inspect().held_total(), 0u);
  Election e = a.get_election("svc", Owner::create());
  EXPECT_FALSE(e.leader().leader.has_value());
  (void)e.campaign("a");
  EXPECT_EQ(a.inspect().held_total(), 1u);
  EXPECT_TRUE(wait_until([&] { return parked_observers(o, "svc", false) == "0"; }, 10s));
  e.resign();
}

TEST(Election, AResignWakesACandidateElsewhereAtTheRelease) {
  if (!test::fast_wakeup_enabled()) GTEST_SKIP() << "fast wake-up is off";
  const Options o = slow_poll(fresh_options());
  DatabaseDistributedLock a(o), b(same_table(o));
  Election first = a.get_election("svc", Owner::create());
  Election second = b.get_election("svc", Owner::create());
  const std::uint64_t t1 = first.campaign("a");
  auto f = std::async(std::launch::async, [&] { return second.try_campaign("b", 20s); });
  ASSERT_EQ(f.wait_for(300ms), std::future_status::timeout);
  const auto t0 = Clock::now();
  first.resign();
  const auto t2 = f.get();
  ASSERT_TRUE(t2.has_value());
  EXPECT_LT(Clock::now() - t0, 5s) << "the candidate waited for the poll";
  EXPECT_GT(*t2, t1);
  second.resign();
}

// Leadership lost while held (here: the row's lease ended behind the
// watchdog's back) is reported like a lost lock, and the owner is told on
// its next proclaim and campaign until it resigns.
TEST(Election, LostLeadershipIsReportedAndRefusedUntilResign) {
  Options o = fresh_options();
  std::mutex m;
  std::vector<std::pair<std::string, std::uint64_t>> lost;
  o.on_lock_lost = [&](std::string_view name, std::uint64_t fence) {
    std::lock_guard<std::mutex> g(m);
    lost.emplace_back(std::string(name), fence);
  };
  DatabaseDistributedLock a(o), b(same_table(o));
  Election e = a.get_election("svc", Owner::create());
  const std::uint64_t t = e.campaign("a");
  test::execute_sql("UPDATE `" + o.table + "` SET expire_time = NOW(6) - INTERVAL 1 SECOND WHERE kind = 6");
  const auto t2 = b.get_election("svc").try_campaign("b", 5s);
  ASSERT_TRUE(t2.has_value());
  EXPECT_GT(*t2, t);
  EXPECT_THROW(e.proclaim("again"), LockLostError);
  EXPECT_EQ(b.get_election("svc").leader().leader->value, "b") << "a lost leader's proclaim landed";
  EXPECT_TRUE(wait_until([&] { std::lock_guard<std::mutex> g(m); return !lost.empty(); }, 5s));
  {
    std::lock_guard<std::mutex> g(m);
    ASSERT_FALSE(lost.empty());
    EXPECT_EQ(lost.front().first, "svc");
    EXPECT_EQ(lost.front().second, t);
  }
  EXPECT_THROW((void)e.campaign("a"), LockLostError);
  EXPECT_FALSE(e.is_leader());
  e.resign();
  EXPECT_FALSE(e.try_campaign("a", 0ms).has_value()) << "b leads";
}

// An observer only watches: its client never marks the row as a waiter's
// (which would keep the name from every other client for a while), even
// where nothing rings for it and it sees leaderships come and go.
TEST(Election, AnObserverKeepsNobodyOut) {
  Options o = fresh_options();
  o.fast_wakeup = false;
  o.poll_interval = 50ms;
  DatabaseDistributedLock watcher(o), leader(same_table(o));
  Election follower = watcher.get_election("svc");
  Election candidate = leader.get_election("svc");
  std::atomic<bool> stop{false};
  std::thread observing([&] {
    std::uint64_t seen = 0;
    while (!stop)
      if (const auto v = follower.observe(seen, 100ms)) seen = v->revision;
  });
  int refused = 0;
  for (int i = 0; i < 20; ++i) {
    if (!candidate.try_campaign("c", 0ms)) {
      ++refused;
      continue;
    }
    std::this_thread::sleep_for(60ms);  // past a poll: the observer's client sees each leadership
    candidate.resign();
  }
  stop = true;
  observing.join();
  EXPECT_EQ(refused, 0) << "an observer's client kept a free election from the only candidate";
}

// The leader's watchdog keeps its leadership past many leases.
TEST(Election, TheWatchdogKeepsALeader) {
  const Options o = fresh_options();  // 1.5 s lease
  DatabaseDistributedLock a(o), b(same_table(o));
  Election e = a.get_election("svc");
  const std::uint64_t t = e.campaign("a");
  EXPECT_FALSE(b.get_election("svc").try_campaign("b", 4s).has_value()) << "a renewed leader was replaced";
  EXPECT_TRUE(e.is_leader());
  EXPECT_EQ(e.leader().leader->term, t);
  e.resign();
}

TEST(Election, ElectionsAreTheirOwnNamespace) {
  const Options o = fresh_options();
  DatabaseDistributedLock a(o), b(same_table(o));
  a.lock("svc");
  Election e = b.get_election("svc");
  EXPECT_TRUE(e.try_campaign("b", 0ms).has_value()) << "a lock named like the election blocked it";
  EXPECT_TRUE(b.try_lock("other"));
  b.unlock("other");
  e.resign();
  a.unlock("svc");
}

TEST(Election, AsyncCampaignAndObserve) {
  const Options o = fresh_options();
  DatabaseDistributedLock a(o), b(same_table(o));
  Election leader = a.get_election("svc", Owner::create());
  Election candidate = b.get_election("svc", Owner::create());
  auto observed = async_observe(candidate, 0, boost::asio::use_future);
  const std::uint64_t t1 = async_campaign(leader, "a", boost::asio::use_future).get();
  EXPECT_GT(t1, 0u);
  const LeaderView v = observed.get();
  ASSERT_TRUE(v.leader.has_value());
  EXPECT_EQ(v.leader->term, t1);
  EXPECT_EQ(async_campaign(leader, "again", boost::asio::use_future).get(), t1) << "the leader's campaign";
  auto waiting = async_campaign(candidate, "b", boost::asio::use_future);
  EXPECT_EQ(waiting.wait_for(300ms), std::future_status::timeout) << "two leaders at once";
  auto next = async_observe(candidate, v.revision, boost::asio::use_future);
  leader.resign();
  const std::uint64_t t2 = waiting.get();
  EXPECT_GT(t2, t1);
  EXPECT_GT(next.get().revision, v.revision);
  // Cancelled by owner, holding nothing.
  Election third = a.get_election("svc", Owner::create());
  const Owner third_owner = Owner::create();
  Election fourth = a.get_election("svc", third_owner);
  auto cancelled = async_campaign(fourth, "d", boost::asio::use_future);
  EXPECT_EQ(cancelled.wait_for(200ms), std::future_status::timeout);
  a.cancel(third_owner);
  EXPECT_THROW(cancelled.get(), Cancelled);
  EXPECT_FALSE(fourth.is_leader());
  auto bad = async_campaign(third, std::string(64 * 1024 + 1, 'x'), boost::asio::use_future);
  EXPECT_THROW(bad.get(), std::invalid_argument);
  candidate.resign();
}

// Two candidates in two processes; the leader is killed with SIGKILL. A
// new leader within the lease plus a poll, with a greater term; an
// observer in a third process sees both leaders, in term order.
TEST(ElectionProcesses, AKilledLeaderIsReplacedAndObserversSeeBothInOrder) {
  Options o = fresh_options();
  o.watchdog_timeout = 2s;
  const std::string url = url_for(o);
  DatabaseDistributedLock here(o);
  ChildProcess observer(test::helper_path(), {url, "observe", "svc", "3"});
  ChildProcess first(test::helper_path(), {url, "campaign", "svc", "first"});
  const auto lead1 = first.wait_for_line("leader ", 20s);
  ASSERT_TRUE(lead1.has_value());
  const std::uint64_t t1 = std::stoull(words(*lead1).at(1));
  ChildProcess second(test::helper_path(), {url, "campaign", "svc", "second"});
  EXPECT_FALSE(second.wait_for_line("leader ", 500ms).has_value()) << "two leaders at once";
  const auto killed_at = Clock::now();
  first.kill(SIGKILL);
  const auto lead2 = second.wait_for_line("leader ", 20s);
  ASSERT_TRUE(lead2.has_value());
  const auto took = Clock::now() - killed_at;
  EXPECT_LT(took, 2s + 200ms + 2s) << "lease + poll, with room for a slow machine";
  const std::uint64_t t2 = std::stoull(words(*lead2).at(1));
  EXPECT_GT(t2, t1);
  // The observer's changes: first leads, perhaps nobody leads (if it
  // looked in that gap), then second leads.
  std::vector<std::uint64_t> terms;
  for (int i = 0; i < 3 && (terms.empty() || terms.back() != t2); ++i) {
    const auto line = observer.wait_for_line("view ", 20s);
    ASSERT_TRUE(line.has_value()) << "the observer saw " << i << " change(s)";
    const auto v = words(*line);
    if (v.at(2) != "none") terms.push_back(std::stoull(v.at(2)));
  }
  EXPECT_EQ(terms, (std::vector<std::uint64_t>{t1, t2})) << "both leaders, in term order";
}

// resign() hands leadership to a candidate in another process at the
// release (fast wake-up), not at its 30 s poll.
TEST(ElectionProcesses, ResignHandsOverToAnotherProcessAtOnce) {
  if (!test::fast_wakeup_enabled()) GTEST_SKIP() << "fast wake-up is off";
  const Options o = slow_poll(fresh_options());
  const std::string url = url_for(o);
  ChildProcess first(test::helper_path(), {url, "campaign-for", "svc", "first", "1500"});
  ASSERT_TRUE(first.wait_for_line("leader ", 20s).has_value());
  ChildProcess second(test::helper_path(), {url, "campaign-for", "svc", "second", "0"});
  const auto resigned = first.wait_for_line("resigned ", 20s);
  ASSERT_TRUE(resigned.has_value());
  const auto lead = second.wait_for_line("leader ", 20s);
  ASSERT_TRUE(lead.has_value());
  const long long gap_ns = std::stoll(words(*lead).at(2)) - std::stoll(words(*resigned).at(1));
  EXPECT_LT(gap_ns, 3'000'000'000LL) << "the candidate waited for the poll";
}

}  // namespace
}  // namespace dlock
