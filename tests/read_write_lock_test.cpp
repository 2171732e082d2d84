// Read-write locks against the real database: every rule of API.md's
// "Read-write locks" section, sync and async, across threads, clients and
// processes.
#include <dlock/asio.hpp>
#include <dlock/dlock.hpp>
#include <gtest/gtest.h>

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>

#include <signal.h>

#include <atomic>
#include <future>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <thread>
#include <vector>

#include "child_process.hpp"
#include "test_env.hpp"

namespace dlock {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using test::ChildProcess;
using test::fresh_options;
using test::on_other_thread;
using test::same_table;
using test::url_for;
using test::wait_until;


TEST(ReadWriteLock, BadInputIsRejectedBeforeAnySql) {
  const Options o = fresh_options();
  DatabaseDistributedLock client(o);
  EXPECT_THROW((void)client.get_read_write_lock(""), std::invalid_argument);
  EXPECT_THROW((void)client.get_read_write_lock(std::string("a\0b", 3)), std::invalid_argument);
  EXPECT_THROW((void)client.get_read_write_lock(std::string(256, 'x')), std::invalid_argument);
  ReadWriteLock rw = client.get_read_write_lock("rw");
  EXPECT_THROW(rw.read_lock().lock(Millis(0)), std::invalid_argument);
  EXPECT_THROW((void)rw.write_lock().try_lock(1s, Millis(-1)), std::invalid_argument);
  EXPECT_THROW(rw.unlock(), NotHeldError);
  EXPECT_THROW(rw.unlock_shared(), NotHeldError);
  EXPECT_EQ(test::query_scalar("SELECT COUNT(*) FROM `" + o.table + "` WHERE kind IN (3, 4)"), "0")
      << "a row was made for bad input";

  Options long_table = fresh_options();
  long_table.table = long_table.table + std::string(64 - long_table.table.size(), 'x');
  test::execute_sql("DROP TABLE IF EXISTS `" + long_table.table + "`");
  DatabaseDistributedLock long_client(long_table);
  ReadWriteLock works = long_client.get_read_write_lock("rw");
  works.lock_shared();
  works.unlock_shared();
}

TEST(ReadWriteLock, ReadersShareAndAWriterExcludesEveryOtherOwner) {
  const Options o = fresh_options();
  DatabaseDistributedLock a(o);
  DatabaseDistributedLock b(same_table(o));
  ReadWriteLock ra = a.get_read_write_lock("doc");
  ReadWriteLock rb = b.get_read_write_lock("doc");
  ASSERT_TRUE(ra.try_lock_shared());
  EXPECT_TRUE(rb.try_lock_shared()) << "reads of different owners coexist";
  EXPECT_TRUE(on_other_thread([&] {
    const bool ok = ra.try_lock_shared();  // another owner of the same client
    if (ok) ra.unlock_shared();
    return ok;
  }));
  EXPECT_FALSE(on_other_thread([&] { return rb.try_lock(); })) << "a write while others read";
  ra.unlock_shared();
  EXPECT_FALSE(on_other_thread([&] { return rb.try_lock(); })) << "one reader is left";
  rb.unlock_shared();
  ASSERT_TRUE(rb.try_lock()) << "no one reads any more";
  EXPECT_TRUE(rb.write_lock().is_locked());
  EXPECT_FALSE(rb.read_lock().is_locked());
  EXPECT_FALSE(ra.try_lock_shared()) << "a read while another owner writes";
  EXPECT_FALSE(ra.try_lock()) << "a second writer";
  EXPECT_FALSE(on_other_thread([&] { return rb.try_lock_shared(); })) << "another owner of the writer's client";
  rb.unlock();
  EXPECT_FALSE(rb.write_lock().is_locked());
  EXPECT_TRUE(ra.try_lock_shared());
  EXPECT_TRUE(ra.read_lock().is_locked());
  ra.unlock_shared();
}

TEST(ReadWriteLock, StandardGuardsWorkAndBothSidesAreReentrant) {
  const Options o = fresh_options();
  DatabaseDistributedLock client(o);
  ReadWriteLock rw = client.get_read_write_lock("guards");
  {
    std::shared_lock<ReadWriteLock> reading(rw);
    std::shared_lock<ReadWriteLock> again(rw);  // reentrant
    EXPECT_EQ(rw.read_lock().hold_count(), 2);
    EXPECT_TRUE(rw.read_lock().is_held_by_current_thread());
    EXPECT_FALSE(rw.write_lock().is_held_by_current_thread());
  }
  EXPECT_EQ(rw.read_lock().hold_count(), 0);
  EXPECT_FALSE(rw.read_lock().is_locked());
  {
    std::unique_lock<ReadWriteLock> writing(rw);
    std::lock_guard<ReadWriteLock> again(rw);
    EXPECT_EQ(rw.write_lock().hold_count(), 2);
  }
  EXPECT_FALSE(rw.write_lock().is_locked());
  {
    std::unique_lock<ReadWriteLock> timed(rw, std::defer_lock);
    EXPECT_TRUE(timed.try_lock_for(2s));
    EXPECT_TRUE(on_other_thread([&] {
      std::shared_lock<ReadWriteLock> r(rw, std::defer_lock);
      const auto t0 = Clock::now();
      const bool got = r.try_lock_for(300ms);
      return !got && Clock::now() - t0 >= 300ms;  // never false before the deadline
    }));
  }
  std::shared_lock<ReadWriteLock> until(rw, std::defer_lock);
  EXPECT_TRUE(until.try_lock_until(Clock::now() + 2s));
}

TEST(ReadWriteLock, DowngradeIsAllowedAndUpgradeIsALogicError) {
  const Options o = fresh_options();
  DatabaseDistributedLock client(o);
  DatabaseDistributedLock other(same_table(o));
  ReadWriteLock rw = client.get_read_write_lock("grade");
  ReadWriteLock orw = other.get_read_write_lock("grade");
  rw.lock();
  rw.lock_shared();  // downgrade: read while writing
  EXPECT_FALSE(orw.try_lock_shared()) << "still writing";
  rw.unlock();
  EXPECT_TRUE(rw.read_lock().is_held_by_current_thread()) << "kept reading after the write ended";
  EXPECT_TRUE(orw.try_lock_shared()) << "others may read now";
  orw.unlock_shared();
  EXPECT_FALSE(orw.try_lock()) << "the downgraded reader still reads";
  // Upgrade: refused before any SQL, the read hold untouched.
  EXPECT_THROW(rw.lock(), std::logic_error);
  EXPECT_THROW((void)rw.try_lock(), std::logic_error);
  EXPECT_THROW((void)rw.try_lock_for(1s), std::logic_error);
  EXPECT_EQ(rw.read_lock().hold_count(), 1);
  rw.unlock_shared();
  EXPECT_TRUE(rw.try_lock()) << "writing after the read ended";
  rw.lock_shared();
  EXPECT_NO_THROW(rw.lock()) << "a writer that also reads re-enters its write";
  rw.unlock();
  rw.unlock();
  rw.unlock_shared();
}

TEST(ReadWriteLock, AWaitingWriterHoldsBackNewReadersButNotReentrantOnes) {
  Options o = fresh_options();
  DatabaseDistributedLock readers(o);
  DatabaseDistributedLock writers(same_table(o));
  ReadWriteLock r = readers.get_read_write_lock("fair");
  ReadWriteLock w = writers.get_read_write_lock("fair");
  r.lock_shared();
  std::atomic<bool> writing{false};
  std::thread writer([&] {
    w.lock();
    writing = true;
    w.unlock();
  });
  // Once the writer waits, a new reader (another owner) is held back...
  ASSERT_TRUE(wait_until([&] { return !on_other_thread([&] {
                                 const bool got = r.try_lock_shared();
                                 if (got) r.unlock_shared();
                                 return got;
                               }); },
                         10s))
      << "new readers kept coming in past a waiting writer";
  // ...but an owner that already reads may re-enter.
  EXPECT_TRUE(r.try_lock_shared());
  EXPECT_FALSE(writing.load());
  r.unlock_shared();
  r.unlock_shared();
  writer.join();
  EXPECT_TRUE(writing.load());
  // The writer has stopped waiting: readers go again.
  EXPECT_TRUE(r.try_lock_shared());
  r.unlock_shared();
}

TEST(ReadWriteLock, ForceUnlockOfTheWriteSideClearsNoWaitingWritersMark) {
  Options o = fresh_options();
  DatabaseDistributedLock readers(o);
  DatabaseDistributedLock writers(same_table(o));
  DatabaseDistributedLock operator_client(same_table(o));
  ReadWriteLock r = readers.get_read_write_lock("marked");
  ReadWriteLock w = writers.get_read_write_lock("marked");
  r.lock_shared();
  std::thread writer([&] {
    w.lock();
    w.unlock();
  });
  const auto reader_gets_in = [&] {
    return on_other_thread([&] {
      const bool got = r.try_lock_shared();
      if (got) r.unlock_shared();
      return got;
    });
  };
  ASSERT_TRUE(wait_until([&] { return !reader_gets_in(); }, 10s)) << "the writer never held new readers back";
  // Nobody holds the write side: nothing to clear, and the waiting writer
  // keeps its place ahead of new readers.
  EXPECT_FALSE(operator_client.get_read_write_lock("marked").write_lock().force_unlock());
  EXPECT_FALSE(reader_gets_in()) << "the force-unlock cleared the waiting writer's intent";
  r.unlock_shared();
  writer.join();
}

TEST(ReadWriteLock, AWriterThatGivesUpNoLongerHoldsReadersBack) {
  Options o = fresh_options();
  DatabaseDistributedLock readers(o);
  DatabaseDistributedLock writers(same_table(o));
  ReadWriteLock r = readers.get_read_write_lock("giveup");
  ReadWriteLock w = writers.get_read_write_lock("giveup");
  r.lock_shared();
  EXPECT_FALSE(w.try_lock_for(500ms));
  const auto t0 = Clock::now();
  EXPECT_TRUE(on_other_thread([&] {
    const bool got = r.try_lock_shared();
    if (got) r.unlock_shared();
    return got;
  })) << "a writer that timed out still holds new readers back";
  EXPECT_LT(Clock::now() - t0, 2s);
  r.unlock_shared();
}

TEST(ReadWriteLock, OverlappingReadersInSeveralClientsDoNotStarveAWriter) {
  Options o = fresh_options();
  o.poll_interval = 200ms;
  DatabaseDistributedLock c1(o);
  DatabaseDistributedLock c2(same_table(o));
  DatabaseDistributedLock cw(same_table(o));
  std::atomic<bool> stop{false};
  std::atomic<int> reads{0};
  constexpr auto kHold = 150ms;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      ReadWriteLock rw = (t % 2 == 0 ? c1 : c2).get_read_write_lock("stream");
      std::this_thread::sleep_for(t * kHold / 4);  // staggered: some reader always reads
      while (!stop) {
        if (rw.try_lock_shared_for(2s)) {
          ++reads;
          std::this_thread::sleep_for(kHold);
          rw.unlock_shared();
        }
      }
    });
  }
  ASSERT_TRUE(wait_until([&] { return reads.load() >= 8; }, 20s));
  ReadWriteLock w = cw.get_read_write_lock("stream");
  const auto t0 = Clock::now();
  const bool got = w.try_lock_for(10s);
  const auto waited = Clock::now() - t0;
  if (got) w.unlock();
  stop = true;
  for (auto& t : threads) t.join();
  ASSERT_TRUE(got) << "the writer was starved by overlapping readers";
  EXPECT_LT(waited, 3s) << "waited far longer than the read holds already granted";
}

TEST(ReadWriteLock, ReadTokensSitBetweenTheWritesAroundThem) {
  const Options o = fresh_options();
  DatabaseDistributedLock a(o);
  DatabaseDistributedLock b(same_table(o));
  ReadWriteLock ra = a.get_read_write_lock("fence");
  ReadWriteLock rb = b.get_read_write_lock("fence");
  ra.lock_shared();
  const std::uint64_t first_read = ra.read_lock().fencing_token();
  EXPECT_NE(first_read, 0u);
  rb.lock_shared();
  EXPECT_EQ(rb.read_lock().fencing_token(), first_read) << "concurrent readers share a token";
  ra.unlock_shared();
  rb.unlock_shared();
  ra.lock();
  const std::uint64_t w1 = ra.write_lock().fencing_token();
  EXPECT_GT(w1, first_read);
  ra.lock();
  EXPECT_EQ(ra.write_lock().fencing_token(), w1) << "a reentrant write keeps its token";
  ra.unlock();
  ra.unlock();
  rb.lock_shared();
  const std::uint64_t r2 = rb.read_lock().fencing_token();
  EXPECT_GT(r2, w1);
  rb.unlock_shared();
  rb.lock();
  const std::uint64_t w2 = rb.write_lock().fencing_token();
  EXPECT_GT(w2, r2);
  rb.lock_shared();  // downgrade: above the write still held, below the next
  const std::uint64_t r3 = rb.read_lock().fencing_token();
  EXPECT_GT(r3, w2);
  rb.unlock();
  rb.unlock_shared();
  ra.lock();
  EXPECT_GT(ra.write_lock().fencing_token(), r3);
  ra.unlock();
  EXPECT_EQ(ra.write_lock().fencing_token(), 0u) << "0 when not held";
  EXPECT_EQ(ra.read_lock().fencing_token(), 0u);
}

TEST(ReadWriteLock, NamesAreTheirOwnNamespace) {
  const Options o = fresh_options();
  DatabaseDistributedLock client(o);
  DatabaseDistributedLock other(same_table(o));
  ReadWriteLock rw = client.get_read_write_lock("shared-name");
  rw.lock();
  EXPECT_TRUE(other.try_lock("shared-name")) << "a mutex of the same name";
  std::optional<Permit> p = other.get_semaphore("shared-name", 1).try_acquire();
  EXPECT_TRUE(p) << "a semaphore of the same name";
  EXPECT_FALSE(client.is_locked("r")) << "no key of the read-write lock leaks into the mutex namespace";
  other.unlock("shared-name");
  rw.unlock();
}

TEST(ReadWriteLock, IntrospectionAndForceUnlockOfEachSide) {
  Options o = fresh_options();
  DatabaseDistributedLock a(o);
  DatabaseDistributedLock b(same_table(o));
  ReadWriteLock ra = a.get_read_write_lock("inspect");
  ReadWriteLock rb = b.get_read_write_lock("inspect");
  EXPECT_FALSE(ra.read_lock().remaining_ttl());
  EXPECT_FALSE(ra.write_lock().remaining_ttl());
  ra.read_lock().lock(20s);
  rb.read_lock().lock(5s);
  const auto ttl = rb.read_lock().remaining_ttl();
  ASSERT_TRUE(ttl);
  EXPECT_GT(*ttl, 15s) << "the longest read lease";
  EXPECT_TRUE(rb.read_lock().force_unlock());
  EXPECT_FALSE(ra.read_lock().is_locked());
  EXPECT_FALSE(ra.read_lock().is_held_by_current_thread()) << "found lost";
  EXPECT_THROW(ra.lock_shared(), LockLostError) << "the owner still owes unlock()";
  ra.unlock_shared();
  rb.unlock_shared();
  EXPECT_TRUE(rb.try_lock()) << "a forced read leaves no count behind";
  EXPECT_TRUE(ra.write_lock().force_unlock());
  EXPECT_FALSE(ra.write_lock().force_unlock()) << "nothing left to clear";
  EXPECT_TRUE(ra.try_lock());
  EXPECT_FALSE(rb.write_lock().is_held_by_current_thread());
  rb.unlock();  // the lost hold's unlock returns normally
  ra.unlock();
}

TEST(ReadWriteLock, WatchdogRenewsBothSidesAndAFixedLeaseEnds) {
  Options o = fresh_options();
  o.watchdog_timeout = 1200ms;
  std::atomic<int> lost{0};
  o.on_lock_lost = [&](std::string_view name, std::uint64_t) {
    if (name == "lease") ++lost;
  };
  DatabaseDistributedLock client(o);
  DatabaseDistributedLock other(same_table(o));
  ReadWriteLock rw = client.get_read_write_lock("lease");
  ReadWriteLock orw = other.get_read_write_lock("lease");
  ReadWriteLock second = client.get_read_write_lock("lease", Owner::create());
  rw.lock_shared();
  second.lock_shared();  // a second reader of this client, renewed in the same statement
  std::this_thread::sleep_for(3s);
  EXPECT_TRUE(rw.read_lock().is_held_by_current_thread()) << "the watchdog let a read lapse";
  EXPECT_TRUE(second.read_lock().is_held_by_current_thread()) << "the watchdog let a read lapse";
  EXPECT_FALSE(orw.try_lock());
  rw.unlock_shared();
  second.unlock_shared();
  ASSERT_TRUE(orw.try_lock()) << "reads released: the write goes";
  std::this_thread::sleep_for(3s);
  EXPECT_TRUE(orw.write_lock().is_held_by_current_thread()) << "the watchdog let a write lapse";
  orw.unlock();
  rw.read_lock().lock(500ms);  // fixed lease, not renewed
  const auto t0 = Clock::now();
  EXPECT_TRUE(orw.try_lock_for(10s)) << "a lapsed read kept the writer out";
  EXPECT_GE(Clock::now() - t0, 300ms);
  orw.unlock();
  rw.unlock_shared();
  EXPECT_TRUE(wait_until([&] { return lost.load() == 1; }, 5s)) << "the lapsed read was not reported";
  // The lapsed read was uncounted when its owner unlocked: a writer goes at
  // once, not at the end of the longest read lease.
  EXPECT_TRUE(orw.try_lock());
  orw.unlock();
}

TEST(ReadWriteLock, ALocalReleaseWakesTheOtherSideAtOnce) {
  Options o = fresh_options();
  o.poll_interval = 60s;  // no poll comes within the bounds below
  DatabaseDistributedLock client(o);
  ReadWriteLock rw = client.get_read_write_lock("local-wake");
  rw.lock_shared();
  auto writer = std::async(std::launch::async, [&] {
    const auto t0 = Clock::now();
    const bool got = rw.try_lock_for(30s);
    if (got) rw.unlock();
    return std::make_pair(got, Clock::now() - t0);
  });
  ASSERT_TRUE(test::wait_for_waiters(client, MetricKind::kWrite, 1));
  rw.unlock_shared();
  const auto [got, waited] = writer.get();
  EXPECT_TRUE(got);
  EXPECT_LT(waited, 5s) << "the writer was not woken by the local read release";
  rw.lock();
  auto reader = std::async(std::launch::async, [&] {
    const auto t0 = Clock::now();
    const bool ok = rw.try_lock_shared_for(30s);
    if (ok) rw.unlock_shared();
    return std::make_pair(ok, Clock::now() - t0);
  });
  ASSERT_TRUE(test::wait_for_waiters(client, MetricKind::kRead, 1));
  rw.unlock();
  const auto [ok, read_wait] = reader.get();
  EXPECT_TRUE(ok);
  EXPECT_LT(read_wait, 5s) << "the reader was not woken by the local write release";
}

TEST(ReadWriteLock, AReleaseInAnotherClientWakesTheOtherSideAtTheRelease) {
  if (!test::fast_wakeup_enabled()) GTEST_SKIP() << "the bell needs fast_wakeup";
  Options o = fresh_options();
  o.poll_interval = 60s;
  o.watchdog_timeout = 30s;
  DatabaseDistributedLock holder(o);
  DatabaseDistributedLock waiter(same_table(o));
  ReadWriteLock h = holder.get_read_write_lock("remote-wake", Owner::create());  // released on another thread
  ReadWriteLock w = waiter.get_read_write_lock("remote-wake");
  for (int round = 0; round < 3; ++round) {
    // A writer waiting for a reader elsewhere.
    h.lock_shared();
    std::thread release_read([&] {
      EXPECT_TRUE(test::wait_for_waiters(waiter, MetricKind::kWrite, 1));
      h.unlock_shared();
    });
    auto t0 = Clock::now();
    const bool wrote = w.try_lock_for(10s);
    release_read.join();
    ASSERT_TRUE(wrote) << "round " << round;
    EXPECT_LT(Clock::now() - t0, 3s) << "round " << round << ": writer not woken at the read release";
    w.unlock();
    // A reader waiting for a writer elsewhere.
    h.lock();
    std::thread release_write([&] {
      EXPECT_TRUE(test::wait_for_waiters(waiter, MetricKind::kRead, 1));
      h.unlock();
    });
    t0 = Clock::now();
    const bool read = w.try_lock_shared_for(10s);
    release_write.join();
    ASSERT_TRUE(read) << "round " << round;
    EXPECT_LT(Clock::now() - t0, 3s) << "round " << round << ": reader not woken at the write release";
    w.unlock_shared();
  }
}

// A read of `name` by a thread of its own in `client`, within 20 s: when it
// got in (none if it did not).
std::future<std::optional<Clock::time_point>> read_when_free(DatabaseDistributedLock& client, const char* name) {
  return std::async(std::launch::async, [&client, name]() -> std::optional<Clock::time_point> {
    ReadWriteLock reader = client.get_read_write_lock(name);
    if (!reader.try_lock_shared_for(20s)) return std::nullopt;
    const auto at = Clock::now();
    reader.unlock_shared();
    return at;
  });
}

// One release of a write elsewhere lets in every reader waiting here, not
// one of them.
TEST(ReadWriteLock, AWriteReleasedElsewhereWakesEveryReaderWaitingHere) {
  if (!test::fast_wakeup_enabled()) GTEST_SKIP() << "the bell needs fast_wakeup";
  Options o = fresh_options();
  o.poll_interval = 60s;     // no poll comes within the bound below
  o.watchdog_timeout = 30s;  // nor the end of the writer's lease
  DatabaseDistributedLock holder(o);
  DatabaseDistributedLock readers(same_table(o));
  ReadWriteLock writer = holder.get_read_write_lock("every-reader");
  writer.lock();
  constexpr int kReaders = 3;
  std::vector<std::future<std::optional<Clock::time_point>>> reads;
  for (int i = 0; i < kReaders; ++i) reads.push_back(read_when_free(readers, "every-reader"));
  ASSERT_TRUE(test::wait_for_waiters(readers, MetricKind::kRead, kReaders));
  const auto released = Clock::now();
  writer.unlock();
  for (auto& read : reads) {
    const auto at = read.get();
    ASSERT_TRUE(at.has_value()) << "a reader never got in";
    EXPECT_LT(*at - released, 3s) << "a reader slept past the write's release";
  }
}

// Force-unlocking the write side here wakes the readers waiting here (no
// bell rings for a force-unlock).
TEST(ReadWriteLock, ForceUnlockingTheWriteSideWakesTheReadersWaitingHere) {
  Options o = fresh_options();
  o.poll_interval = 60s;
  o.watchdog_timeout = 30s;
  DatabaseDistributedLock holder(o);
  DatabaseDistributedLock client(same_table(o));
  holder.get_read_write_lock("forced-wake").lock();
  auto reader = read_when_free(client, "forced-wake");
  ASSERT_TRUE(test::wait_for_waiters(client, MetricKind::kRead, 1));
  const auto forced = Clock::now();
  EXPECT_TRUE(client.get_read_write_lock("forced-wake").write_lock().force_unlock());
  const auto at = reader.get();
  ASSERT_TRUE(at.has_value()) << "the reader never got in";
  EXPECT_LT(*at - forced, 3s) << "the reader slept past the force-unlock of the write side";
}

TEST(ReadWriteLock, AnotherProcessesHoldsAreRespectedAndACrashedReaderLapses) {
  Options o = fresh_options();
  o.watchdog_timeout = 1500ms;
  DatabaseDistributedLock client(o);
  ReadWriteLock rw = client.get_read_write_lock("xproc");
  ChildProcess reader(test::helper_path(), {url_for(o), "hold-read", "xproc"});
  ASSERT_TRUE(reader.wait_for_line("acquired", 15s));
  EXPECT_TRUE(rw.try_lock_shared()) << "reads of two processes coexist";
  rw.unlock_shared();
  EXPECT_FALSE(rw.try_lock());
  reader.kill(SIGKILL);
  const auto killed = Clock::now();
  ASSERT_TRUE(rw.try_lock_for(20s)) << "the crashed reader's hold never lapsed";
  EXPECT_LT(Clock::now() - killed, 1500ms + 3s);
  rw.unlock();
  // A crashed reader's count, never subtracted, does not outlive its lease
  // either: after reads come and go again, a writer goes at once.
  ChildProcess crasher(test::helper_path(), {url_for(o), "hold-read", "xproc"});
  ASSERT_TRUE(crasher.wait_for_line("acquired", 15s));
  crasher.kill(SIGKILL);
  ASSERT_TRUE(rw.try_lock_shared());
  rw.unlock_shared();
  ASSERT_TRUE(wait_until([&] { return !rw.read_lock().is_locked(); }, 10s)) << "the crashed reader never lapsed";
  rw.lock_shared();  // reads come and go after the lapse
  rw.unlock_shared();
  EXPECT_TRUE(rw.try_lock()) << "a lapsed reader's count still held the writer back";
  rw.unlock();


  ChildProcess writer(test::helper_path(), {url_for(o), "write-for", "xproc", "800"});
  ASSERT_TRUE(writer.wait_for_line("acquired", 15s));
  const auto t0 = Clock::now();
  ASSERT_TRUE(rw.try_lock_shared_for(20s));
  EXPECT_GE(Clock::now() - t0, 300ms) << "read while the other process wrote";
  EXPECT_TRUE(writer.wait_for_line("released", 5s));
  rw.unlock_shared();
}

TEST(ReadWriteLock, OwnerBoundSidesUnlockFromAnotherThreadAndMixWithAsync) {
  const Options o = fresh_options();
  DatabaseDistributedLock client(o);
  DatabaseDistributedLock other(same_table(o));
  const Owner owner = Owner::create();
  ReadWriteLock rw = client.get_read_write_lock("owned", owner);
  rw.lock();
  on_other_thread([&] {
    EXPECT_EQ(rw.write_lock().hold_count(), 1) << "the owner's hold, seen from any thread";
    rw.lock_shared();  // downgrade on another thread: the same owner
  });
  on_other_thread([&] { rw.unlock(); });
  EXPECT_FALSE(other.get_read_write_lock("owned").try_lock());
  async_unlock(rw.read_lock(), asio::use_future).get();
  EXPECT_TRUE(other.get_read_write_lock("owned").try_lock());
  other.get_read_write_lock("owned").unlock();
  EXPECT_THROW(async_unlock(rw.read_lock(), asio::use_future).get(), NotHeldError);
}

TEST(ReadWriteLock, AsyncOperationsOnBothSides) {
  const Options o = fresh_options();
  DatabaseDistributedLock client(o);
  DatabaseDistributedLock other(same_table(o));
  ReadWriteLock mine = client.get_read_write_lock("async", Owner::create());
  ReadWriteLock theirs = other.get_read_write_lock("async");
  async_lock(mine.read_lock(), asio::use_future).get();
  EXPECT_TRUE(theirs.try_lock_shared());
  theirs.unlock_shared();
  // The upgrade error arrives through the handler.
  EXPECT_THROW(async_lock(mine.write_lock(), asio::use_future).get(), std::logic_error);
  EXPECT_THROW((void)async_try_lock(mine.write_lock(), 100ms, asio::use_future).get(), std::logic_error);
  async_unlock(mine.read_lock(), asio::use_future).get();

  // A coroutine writer waits for a reader in another client and is woken.
  theirs.lock_shared();
  asio::io_context io;
  std::atomic<bool> wrote{false};
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        ReadWriteLock rw = client.get_read_write_lock("async", Owner::create());
        co_await async_lock(rw.write_lock(), asio::use_awaitable);
        wrote = true;
        co_await async_unlock(rw.write_lock(), asio::use_awaitable);
      },
      asio::detached);
  std::thread runner([&] { io.run(); });
  EXPECT_TRUE(test::wait_for_waiters(client, MetricKind::kWrite, 1));
  EXPECT_FALSE(wrote.load()) << "wrote while another client read";
  theirs.unlock_shared();
  runner.join();
  EXPECT_TRUE(wrote.load());
}

TEST(ReadWriteLock, CancelByOwnerEndsWaitsOnBothSides) {
  const Options o = fresh_options();
  DatabaseDistributedLock client(o);
  DatabaseDistributedLock other(same_table(o));
  ReadWriteLock theirs = other.get_read_write_lock("cancel");
  theirs.lock();
  const Owner owner = Owner::create();
  ReadWriteLock mine = client.get_read_write_lock("cancel", owner);
  auto read_wait = async_lock(mine.read_lock(), asio::use_future);
  auto write_wait = async_try_lock(mine.write_lock(), 60s, asio::use_future);
  // Both parked (cancel also works before; this covers parked waits).
  ASSERT_TRUE(test::wait_for_waiters(client, MetricKind::kRead, 1));
  ASSERT_TRUE(test::wait_for_waiters(client, MetricKind::kWrite, 1));
  client.cancel(owner);
  EXPECT_THROW(read_wait.get(), Cancelled);
  EXPECT_THROW(write_wait.get(), Cancelled);
  theirs.unlock();
  EXPECT_TRUE(theirs.try_lock_shared()) << "a cancelled writer holds no one back";
  theirs.unlock_shared();
  EXPECT_EQ(mine.read_lock().hold_count(), 0) << "a cancelled operation holds nothing";
}

TEST(ReadWriteLock, DestroyingTheClientReleasesItsHolds) {
  const Options o = fresh_options();
  DatabaseDistributedLock observer(o);
  ReadWriteLock rw = observer.get_read_write_lock("shutdown");
  auto client = std::make_unique<DatabaseDistributedLock>(same_table(o));
  client->get_read_write_lock("shutdown").lock_shared();
  client->get_read_write_lock("shutdown", Owner::create()).lock_shared();
  EXPECT_FALSE(rw.try_lock());
  client.reset();
  EXPECT_TRUE(rw.try_lock()) << "both reads were released and uncounted at shutdown";
  rw.unlock();
  EXPECT_EQ(test::query_scalar("SELECT COUNT(*) FROM `" + o.table + "` WHERE kind = 4"), "0")
      << "the client's slot rows went with it";
}

TEST(ReadWriteLock, WithoutTableCreationTheLockTableIsAllItNeeds) {
  Options o = fresh_options();
  DatabaseDistributedLock creator(o);
  o.create_table = false;
  DatabaseDistributedLock client(o);
  ReadWriteLock rw = client.get_read_write_lock("x");
  rw.lock_shared();
  rw.unlock_shared();
  rw.lock();
  EXPECT_EQ(rw.write_lock().fencing_token(), 2u);
  rw.unlock();
}

}  // namespace
}  // namespace dlock
