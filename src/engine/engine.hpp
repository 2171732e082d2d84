// The engine behind DatabaseDistributedLock: one for every kind of hold.
//
// A kind (engine/hold_kind.hpp) brings its statements and its rule of who
// may have a hold; the engine does the rest, once for all kinds:
//
// - Acquire (attempt.cpp): an attempt re-enters the owner's live hold, or
//   takes a fresh one with a random hold id written into the row; every
//   later statement of that hold matches it. Refused, the request waits
//   until a local release wakes it, a bell rings for a release elsewhere
//   (wakeup/bell_watcher.hpp), the poller sees it may get in, or the
//   blocking holds' leases end. attempt_step is one attempt; drive() is the
//   blocking driver, AsyncAcquire (async_acquire.hpp) the asynchronous one.
// - Release (release.cpp): one count down; the last one hands the hold
//   straight to a local waiter in one statement (a direct handoff), or
//   frees the row, ringing the holding session's bell when a waiter
//   elsewhere marked it.
// - Renewal and polling (background.cpp): the watchdog renews every
//   watchdog-mode hold of every kind in one statement per tick (around a
//   row another transaction has locked); the poller asks each kind about
//   the names local threads wait for.
// - Losses: a hold found lost (at its local deadline by the clock, or by
//   any statement) is marked lost (its owner's next acquire throws
//   LockLostError until it has made its unlock() calls), counted, its bell
//   rung, reported to on_lock_lost once, and its waiters woken: note_lost,
//   the one loss path.
// - Time: the clock (runtime/clock_thread.hpp) runs no database work: it
//   counts each hold lost at its local deadline and calls on_lock_lost, so
//   neither waits behind a statement.
// - Unknown outcomes (run_reconciled): a statement whose connection died is
//   reconciled by reading on a new connection what its hold id shows, never
//   by running it blindly again.
//
// Time: each call runs under a CallBudget of io_timeout, which bounds its
// statement retries and pool waits in total.
#pragma once

#include <array>
#include <atomic>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/keys.hpp"
#include "base/kinds_table.hpp"
#include "base/name_marks.hpp"
#include "base/string_map.hpp"
#include "dlock/options.hpp"
#include "engine/hold_kind.hpp"
#include "engine/holds.hpp"
#include "engine/request.hpp"
#include "metrics/metric_counters.hpp"
#include "runtime/async_operations.hpp"
#include "runtime/clock_thread.hpp"
#include "runtime/io_thread.hpp"
#include "sql/connection_pool.hpp"
#include "sql/hold_rows.hpp"
#include "sql/schema.hpp"
#include "wakeup/bell_watcher.hpp"
#include "wakeup/waiter_registry.hpp"

namespace spdlog {
class logger;
}

namespace dlock::details {

class Engine {
 public:
  // Validates `options` (std::invalid_argument); connects nothing yet.
  explicit Engine(Options options);
  // Releases this client's holds (best effort), stops every thread.
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Registers a kind; only before start().
  void add_kind(std::unique_ptr<HoldKind> kind);
  // Connects, prepares the table (Schema::prepare) and starts the watchdog
  // and the poller. Throws BackendError.
  void start();

  // ---- operations; `owner` is an Owner id (never 0)
  //
  // Validates (std::invalid_argument, before any SQL) and fixes the deadline
  // now. lease: nullopt = watchdog mode; wait: nullopt = forever, <= 0 =
  // one attempt. `bound`: a semaphore's.
  AcquireRequest make_request(NameKeyView key, std::uint64_t owner, std::optional<Millis> lease,
                              std::optional<Millis> wait, std::uint32_t bound = 0);
  // One attempt, and what to do next. Throws LockLostError, BackendError,
  // and what the kind's check throws.
  AcquireStep attempt_step(const AcquireRequest& request);
  // The blocking driver. `interrupted` (may be null) is checked at every
  // wake-up; once true the wait gives up at the next one (interrupt_waits
  // wakes them). Returns the last step (kAcquired or kGaveUp).
  AcquireStep drive(const AcquireRequest& request, const std::atomic<bool>* interrupted = nullptr);
  // Releases one hold of `owner` on `key`. The last one leaves the name
  // taken until `at_least` after the grant (server clock). Throws
  // NotHeldError (before any SQL) when there is none; never for database
  // trouble (logged: the lease ends it).
  void release(NameKeyView key, std::uint64_t owner, Millis at_least = Millis::zero());
  // The engine's side of a release, for a caller that took the hold's
  // count out of the registry itself (`before`, as it was) under the
  // owner's stripe: a lost hold's count just goes, a nested one counts down
  // in the database. True when it was the last count of a live hold: its
  // row is to be freed (free_rows), its waiting mark is cleared already.
  bool ends_hold(HoldKind& k, NameKeyView key, std::uint64_t owner, const Hold& before);
  // Frees the rows of holds whose last count was released (ends_hold), of
  // kinds whose free is the shared statement (HoldRows::free_all): one
  // statement per bell session, on that session when it is idle so its
  // bell rings for waiters elsewhere in the same statement, else anywhere
  // and the bell rung when the session is idle. A hold found lost is
  // reported (note_lost); the names' local waiters are woken. Never throws
  // for database trouble (logged: the leases end the holds).
  void free_rows(const std::vector<std::pair<NameKey, Hold>>& last);
  // The owner stripes of `keys` for `owner`, locked in one order, so two
  // callers locking overlapping keys never deadlock.
  std::vector<std::unique_lock<std::mutex>> lock_stripes(const std::vector<NameKey>& keys, std::uint64_t owner);
  // While it lives, this client waits for `keys` only as a watcher that
  // must not keep them from anyone (a multi-lock's names: a holder
  // elsewhere that wants one of them before it lets go of another would
  // wait for ever): the poller marks none of them for it.
  class WatchOnly {
   public:
    WatchOnly(Engine& engine, std::vector<NameKey> keys);
    ~WatchOnly();
    WatchOnly(const WatchOnly&) = delete;
    WatchOnly& operator=(const WatchOnly&) = delete;

   private:
    Engine& engine_;
    const std::vector<NameKey> keys_;
  };
  // The wait rule of every request: `wait` as given (nullopt or about a
  // century: forever; <= 0: one attempt), and the step after a refusal
  // whose blocking holds end within `ttl_us` (kGaveUp past the deadline).
  static void set_wait(std::optional<Millis> wait, bool& forever, bool& single_attempt, SteadyTime& deadline);
  static AcquireStep wait_step(bool forever, SteadyTime deadline, std::int64_t ttl_us);
  // Throws LockLostError for `key`'s hold, counted lost and still owed unlock().
  [[noreturn]] void throw_lost(NameKeyView key, std::uint64_t fence) const;
  // The bell watcher (null without fast wake-up).
  BellWatcher* bells() const { return bells_.get(); }
  // Runs `task` on the io thread (it may run statements there).
  void post_io(std::string what, IoThread::Task task) { io_.post(std::move(what), std::move(task)); }
  // Rings pooled session `session`'s bell once the session is idle (never
  // waiting for it), and moves the session's other holds to its next bell.
  void ring_when_idle(std::uint64_t session);
  // Frees every hold of `key`'s kind on its name (any client) and wakes
  // waiters here; how many.
  std::size_t force_release(NameKeyView key);
  bool is_locked(NameKeyView key);
  // The owner's hold as the database shows it now; nullopt when it holds
  // none (a loss found here is reported). No SQL when there is no local hold.
  std::optional<Hold> confirmed_hold(NameKeyView key, std::uint64_t owner);
  std::optional<Millis> remaining_ttl(NameKeyView key);
  // The owner's fence; 0 when it holds none. One read the first time per hold.
  std::uint64_t fencing_token(NameKeyView key, std::uint64_t owner);
  // The guard statement of `owner`'s live holds on `keys`, in their order
  // (sql/guard_statement.hpp). NotHeldError when it holds none on one of
  // them; LockLostError when one was counted lost. No SQL, but a read to
  // learn a permit's slot the first time.
  std::string guard_sql(const std::vector<NameKey>& keys, std::uint64_t owner);
  // The owner's live hold as this client knows it (no SQL).
  std::optional<Hold> local_hold(NameKeyView key, std::uint64_t owner) const;
  // Wakes every local waiter of `key` so each looks at its `interrupted`.
  void interrupt_waits(NameKeyView key) { waiters_.wake_all(key); }
  // Drivers: a waiter subscribed / the last one of `key` left (`acquired`:
  // the last one left holding it).
  void waiting_started(const AcquireRequest& request);
  void waiting_ended(const NameKey& key, bool acquired);

  WaiterRegistry& waiters() { return waiters_; }
  AsyncOperations& async() { return async_; }
  HoldRegistry& holds() { return holds_; }
  const Options& options() const { return options_; }
  const std::shared_ptr<spdlog::logger>& logger() const { return logger_; }
  const std::string& machine_id() const { return machine_id_; }
  const std::string& host() const { return host_; }
  std::uint32_t pid() const { return pid_; }
  const HoldRows& rows() const { return rows_; }
  const Schema& schema() const { return schema_; }
  HoldKind& kind(Kind k) const;
  // This client's random 48-bit key (intents, reader slots) and the 16-bit
  // tag every hold id it makes starts with: a waiter tells a hold of its
  // own client from the row alone, and never marks it for a ring.
  std::uint64_t client_key() const { return client_key_; }
  std::uint64_t hold_tag() const { return hold_tag_; }
  bool is_this_clients(std::uint64_t hold_id) const { return hold_id != 0 && hold_id >> 48 == hold_tag_; }
  // A fresh hold id with this client's tag.
  std::uint64_t tagged_hold_id() const;
  bool fast_wakeup() const { return options_.fast_wakeup; }

  // ---- connections and the unknown-outcome rule
  //
  // A pooled connection for the calling thread (see WarmestConnection).
  PooledConnection pooled_connection();
  template <class Fn>
  auto with_connection(Fn&& fn) {
    PooledConnection connection = pooled_connection();
    return fn(*connection);
  }
  // A read, run once more on a new connection if its connection died.
  template <class Fn>
  auto read(Fn&& fn) {
    try {
      return with_connection(fn);
    } catch (const OutcomeUnknown&) {
      PooledConnection fresh = pool_.acquire_fresh();
      return fn(*fresh);
    }
  }
  // The other rule, for a statement that is safe to run twice (a read, a
  // renewal of this client's own live holds, its waiting marks, a queue
  // join that upserts one entry): run once more on the connection
  // `connection` gives next (a new one, the old one being broken) if its
  // connection died mid-statement.
  template <class Fn>
  static auto run_idempotent(const std::function<Connection&()>& connection, Fn&& fn) {
    try {
      return fn(connection());
    } catch (const OutcomeUnknown&) {
      return fn(connection());
    }
  }
  // The same on the caller's connection `c`, once more on another pooled
  // connection.
  template <class Fn>
  auto run_idempotent(Connection& c, Fn&& fn) {
    try {
      return fn(c);
    } catch (const OutcomeUnknown&) {
      return with_connection(fn);
    }
  }
  // What reading on a new connection shows of a statement whose outcome is
  // unknown.
  enum class Verdict { kApplied, kNotApplied, kRunAgain };
  // The one rule for a statement that changes rows: runs `statement`
  // (Connection& -> bool, true when it applied); if its connection dies
  // mid-statement, `decide` reads on a newly opened connection whether it
  // applied, and only kRunAgain runs it once more there (statements are
  // written so that a late first run and the second apply once: absolute
  // counts, the hold's own id matched). Throws BackendError when even the
  // read fails.
  bool run_reconciled(std::string_view name, const std::function<bool(Connection&)>& statement,
                      const std::function<Verdict(Connection&)>& decide);
  // The take every kind runs, under that rule: `statement` runs the kind's
  // take on a pooled connection with the session's bell (null: none) and
  // says whether it took; `t` records the bell's session. On an unknown
  // outcome the hold is looked for by `hold_id` on a new connection: found,
  // it was taken (kSlotAndFence: and the row's slot and fence are the
  // hold's; not so for a read, whose token is the head's); not found, the
  // take runs again.
  enum class TakeLearns { kNothing, kSlotAndFence };
  bool take_reconciled(HoldKind::Taken& t, NameKeyView key, std::uint64_t hold_id, TakeLearns learns,
                       const std::function<bool(Connection&, const std::string* bell)>& statement);
  // The reading half of that rule, for a statement that died with `cause`
  // on a connection of the caller's own: settles the lost session, then
  // `decide`s on a newly opened connection. Throws BackendError when the
  // read fails.
  Verdict reconcile(std::string_view name, const OutcomeUnknown& cause,
                    const std::function<Verdict(Connection&)>& decide);

  // ---- waiting clients' marks (HoldKind::Traits::intents)
  //
  // Marks this client as waiting on `key`'s row; recorded only if the mark
  // is this client's now (another client's live mark is left alone: the
  // poller tries again). Best effort.
  void mark_intent(NameKeyView key);
  // Whether this client's mark is on `key` now.
  bool has_intent(NameKeyView key);
  // The take that cleared this client's mark on `key` ran.
  void intent_taken(NameKeyView key);
  Millis intent_lease() const;

  // ---- the watchdog
  // Renews every watchdog-mode hold now, on the io thread (a kind's
  // maintain: a hold granted with a lease shorter than watchdog_timeout).
  void renew_now(const IoThread::ConnectionSource& connection) { renew_tick(connection); }

  // ---- losses: the one path every finder of a loss takes
  // Marks the hold of `generation` lost and reports it, once: counted under
  // its cause, its bell rung, logged, on_lock_lost called (on the clock's
  // thread), its waiters woken. `taken_over`: the row showed another live
  // holder. The cause counted (LossCause): kTakenOver if so, else kForced
  // while the hold's local lease still ran (a take elsewhere needs it
  // ended, so only a force-unlock frees it sooner), else kLeaseRanOut.
  void note_lost(NameKeyView key, std::uint64_t owner, std::uint64_t generation, const char* why,
                 bool taken_over = false);
  // The same for a hold its release took out of the registry (`released`,
  // as it was) and then found lost: reported from that.
  void note_lost(NameKeyView key, const Hold& released, const char* why, bool taken_over = false);
  // A "seen free" hint on `key` if a local hold on it looks live (the
  // poller or a force-unlock here saw the row free): the next attempt asks
  // the database rather than waiting for that hold.
  void hint_free_if_held_here(NameKeyView key);

  // ---- metrics (metrics.cpp)
  //
  // The counters, or null when Options::metrics is off.
  MetricCounters* counters() const { return metrics_.get(); }
  // Everything counted, with the gauges read now.
  Metrics metrics() const;
  // An acquire call of `kind` that began at `started` ended: acquired, or
  // with `error`, or gave up (a single attempt: refused; `cancelled`: ended
  // by cancel or an interrupt; else timed out).
  void count_acquire(MetricKind kind, SteadyTime started, bool acquired, bool single_attempt, bool cancelled,
                     const std::exception_ptr& error) noexcept;
  // Runs `acquire` (an uncounted blocking driver: its result says whether
  // it acquired) counted as one acquire call of `kind`.
  template <class Fn>
  auto counted(MetricKind kind, bool single_attempt, const std::atomic<bool>* interrupted, Fn&& acquire) {
    if (!metrics_) return acquire();
    const auto started = std::chrono::steady_clock::now();
    try {
      auto result = acquire();
      count_acquire(kind, started, acquired(result), single_attempt, interrupted != nullptr && interrupted->load(),
                    nullptr);
      return result;
    } catch (...) {
      count_acquire(kind, started, false, single_attempt, false, std::current_exception());
      throw;
    }
  }
  static bool acquired(bool result) { return result; }
  static bool acquired(const AcquireStep& step) { return step.next == AcquireStep::Next::kAcquired; }
  // While it lives, one more acquire call of its kind waits (a gauge).
  class CountedWait {
   public:
    CountedWait(MetricCounters* counters, MetricKind kind) noexcept : counters_(counters), kind_(kind) {
      if (counters_ != nullptr) counters_->waiting(kind_, 1);
    }
    ~CountedWait() {
      if (counters_ != nullptr) counters_->waiting(kind_, -1);
    }
    CountedWait(const CountedWait&) = delete;
    CountedWait& operator=(const CountedWait&) = delete;

   private:
    MetricCounters* const counters_;
    const MetricKind kind_;
  };
  // A timed wait of an acquire ended with no wake: counted as a lease-end
  // wake-up unless the acquire's own deadline has come.
  void timed_wait_ended(bool forever, SteadyTime deadline) noexcept;

  // ---- tuning and tests
  // How long a chain of local handoffs may keep a name from other clients,
  // and how long this client then holds back its own fresh takes.
  static constexpr Millis kHandoffChain{50};
  static constexpr Millis kYieldAfterChain{5};
  // How long a name stays marked as waited for elsewhere after a ring.
  static constexpr Millis kRingAtOnceFor{1'000};
  // How soon a failed renewal is tried again (never later than the next
  // tick either).
  static constexpr Millis kRenewRetry{250};
  // Longest wait in line or on a fair queue entry (one statement; see
  // wakeup/bell_watcher.hpp, "Waiting in turn").
  static constexpr int kTurnWaitSeconds = 30;
  std::uint64_t handoffs() const noexcept { return handoffs_.load(std::memory_order_relaxed); }
  void enable_handoffs(bool on) noexcept { handoffs_enabled_.store(on, std::memory_order_relaxed); }
  void set_handoff_chain_for_tests(Millis bound) noexcept {
    handoff_chain_ms_.store(bound.count(), std::memory_order_relaxed);
  }
  // Runs on the acquiring thread when a blocking acquire's first attempt
  // was refused, before it subscribes (tests; set while no acquire runs).
  std::function<void()> refused_before_subscribing;
  // While one exists on a thread, its statements take the warmest idle
  // pooled connection rather than the one the thread used last (for the
  // asynchronous workers, which run any owner's step).
  class WarmestConnection {
   public:
    WarmestConnection();
    ~WarmestConnection();
    WarmestConnection(const WarmestConnection&) = delete;
    WarmestConnection& operator=(const WarmestConnection&) = delete;

   private:
    bool previous_;
  };
  ConnectionPool& pool() { return pool_; }
  // How long a read hold's slot row stays after its lease ended before any
  // client may delete it (the rows of clients that died). Default 1 hour.
  Millis reader_rows_kept_for() const { return Millis(reader_rows_kept_for_ms_.load(std::memory_order_relaxed)); }
  void set_reader_rows_kept_for(Millis kept) noexcept {
    reader_rows_kept_for_ms_.store(kept.count(), std::memory_order_relaxed);
  }

 private:
  struct Attempt {
    bool acquired = false;
    std::int64_t ttl_us = 0;
    bool foreign = false;
  };
  Attempt attempt(HoldKind& k, const AcquireRequest& r);
  // drive() without the counting.
  AcquireStep drive_uncounted(const AcquireRequest& request, const std::atomic<bool>* interrupted);
  bool reenter(HoldKind& k, const AcquireRequest& r, const Hold& local);
  enum class Handoff { kHanded, kLost, kDeclined };
  void claim_for_handoff(NameKeyView key, SteadyTime chain_started, WaiterRegistry::ClaimedWaiter& claim);
  Handoff hand_over(HoldKind& k, NameKeyView key, std::uint64_t owner, const Hold& before,
                    const std::shared_ptr<WaiterRegistry::Parked>& claimed);
  bool free_row(HoldKind& k, const RowKey& row, const Hold& before, std::int64_t at_least_us);
  // One count down of a nested hold (release).
  void count_down(NameKeyView key, std::uint64_t owner, const Hold& before);
  // free_rows for the holds of one bell session; which of them it freed.
  std::size_t free_on_session(std::uint64_t session, const std::vector<HeldRow>& rows, bool& rang);
  void report_row_losses(const std::vector<HeldRow>& rows, const std::vector<Hold>& holds, SteadyTime sent);
  bool watched_only(NameKeyView key) const;
  void rang_for_waiters_elsewhere(NameKeyView key);
  void restamp_after_ring(Connection& c, const std::string& rung);
  void free_quietly(HoldKind& k, const RowKey& row, std::uint64_t hold_id);
  // note_lost's body, for a hold no longer live in the registry.
  void report_loss(NameKeyView key, const Hold& hold, const char* why, bool taken_over);
  void notify_lost(std::string_view name, std::uint64_t fence);
  // The clock's tick: counts lost every hold whose deadline has passed;
  // returns the next deadline.
  SteadyTime count_due_losses();
  // Clears this client's waiting mark on `key`: at once when its waiters
  // gave up (others may go now), on the io thread when one acquired (the
  // hold keeps others out meanwhile, and the acquire returns sooner).
  void unmark_intent(const NameKey& key, bool acquired);
  void clear_mark(const NameKey& key, Connection& c);
  // Wakes every waiter of the other side of `key`'s primitive, if it has one.
  void wake_other_side(NameKeyView key);
  // Before a release of `key`: clears a mark still left by its acquire.
  void clear_mark_before_release(NameKeyView key);
  // Whether `key`'s mark waits to be cleared (marks_to_clear_).
  bool mark_pending(NameKeyView key);
  // Clears `key`'s pending mark, or waits for a clear of it in flight.
  void clear_pending_mark(NameKeyView key, const std::function<Connection&()>& connection);
  Millis renew_period() const;
  // One renewal round; false when some live hold was skipped (its row
  // locked by another transaction) and wants another round soon.
  bool renew_tick(const IoThread::ConnectionSource& connection);
  // The watchdog holds still within their local deadline; the others are
  // reported lost.
  std::vector<HoldRef> unexpired_watchdog_holds();
  // The renewal statement over `holds` (around rows locked by another
  // transaction when one was lately): how many it renewed, and when it was
  // sent.
  std::size_t run_renewal(const IoThread::ConnectionSource& connection, const std::vector<HeldRow>& holds,
                          std::chrono::steady_clock::time_point& sent);
  // After a renewal that renewed fewer rows than `live` has holds: reads
  // which are gone (reported lost) and which are live for how long. False
  // when some live hold still wants a renewal soon.
  bool settle_partial_renewal(Connection& connection, const std::vector<HoldRef>& live,
                              const std::vector<HeldRow>& holds, std::size_t renewed);
  // A renewal tick, and when it fails or skips a hold, another one soon
  // (kRenewRetry) until all get through: the holds' deadlines are at stake.
  void renew_or_retry(const IoThread::ConnectionSource& connection);
  void renew_again_soon();
  void count_renewals(const std::vector<HoldRef>& renewed);
  void poll_tick(const IoThread::ConnectionSource& connection);
  void release_all_at_shutdown();
  // Owner stripes: one owner's operations on one name are serialized. A
  // stripe is held across the operation's statement; with 4,096 of them,
  // unrelated (name, owner) pairs rarely share one.
  std::mutex& owner_mutex(Kind serial, std::string_view name, std::uint64_t owner);

  std::atomic<bool> closing_{false};  // no on_lock_lost from here on
  bool started_ = false;              // start() completed: there may be holds and rows to release
  std::array<std::mutex, 4096> owner_mutexes_;
  const Options options_;
  const std::shared_ptr<spdlog::logger> logger_;
  const std::string machine_id_;
  const std::string host_;
  const std::uint32_t pid_;
  const std::uint64_t client_key_;
  const std::uint64_t hold_tag_;
  const std::shared_ptr<MetricCounters> metrics_;  // null: Options::metrics off
  const ConnectionSettings settings_;
  const HoldRows rows_;
  const Schema schema_;
  ConnectionPool pool_;
  HoldRegistry holds_;
  WaiterRegistry waiters_;
  std::array<std::unique_ptr<HoldKind>, 8> kinds_;
  std::atomic<std::uint64_t> handoffs_{0};
  std::atomic<bool> handoffs_enabled_{true};
  std::atomic<Millis::rep> handoff_chain_ms_{kHandoffChain.count()};
  std::atomic<Millis::rep> reader_rows_kept_for_ms_{3'600'000};
  NameMarks yields_;            // fresh takes here hold back until the mark ends
  NameMarks free_hints_;        // seen free while a local hold looked live
  NameMarks waited_elsewhere_;  // releases ring first while marked
  // Intent statements and the look at intents_ that decided them run under
  // intent_statements_mutex_ (taken before intents_mutex_): the poller's
  // renewal of a mark cannot land after the unmark of a waiter that stopped
  // waiting meanwhile.
  std::mutex intent_statements_mutex_;
  mutable std::mutex watch_only_mutex_;
  NameKeyMap<unsigned> watch_only_;  // keys waited for by WatchOnly watchers, and by how many
  std::mutex intents_mutex_;
  NameKeyMap<bool> intents_;  // keys this client holds a mark on
  std::atomic<std::size_t> intent_count_{0};  // intents_.size(), read without the lock
  // Marks left by a waiter that acquired, cleared by the io thread or at
  // the latest by the release of that name (both under intents_mutex_).
  NameKeyMap<bool> marks_to_clear_;
  std::atomic<std::size_t> marks_to_clear_count_{0};
  bool renew_around_locked_rows_ = false;  // io thread only: see renew_tick
  bool renew_retry_armed_ = false;         // io thread only: see renew_or_retry
  ClockThread clock_;  // stopped first in the destructor
  IoThread io_;  // stopped in the destructor once the watcher has stopped
  std::unique_ptr<BellWatcher> bells_;  // null without fast wake-up; stopped first in the destructor, destroyed after io_ stops
  AsyncOperations async_;               // shut down first in the destructor
};

}  // namespace dlock::details
