// The engine behind DatabaseDistributedLock: one for every kind of hold.
// A kind (engine/hold_kind.hpp) brings its statements and its rule of who
// may have a hold; the engine does the rest, once for all kinds: attempt
// (attempt.cpp), the drivers of every wait (wait.cpp, async_wait.cpp),
// release and handoff (release.cpp), poll (background.cpp), the one loss
// path (note_lost), and, from its parts, the unknown-outcome rules, the
// watchdog, intents, counting, owner stripes, identity and tuning.
// docs/design.md, "Map", walks one lock() and one unlock() through it.
// Each call runs under a CallBudget of io_timeout (all its retries).
#pragma once

#include <array>
#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/keys.hpp"
#include "base/kinds_table.hpp"
#include "base/name_notes.hpp"
#include "dlock/options.hpp"
#include "engine/acquire_counting.hpp"
#include "engine/hold_kind.hpp"
#include "engine/kind_context.hpp"
#include "engine/owner_stripes.hpp"
#include "engine/holds.hpp"
#include "engine/request.hpp"
#include "engine/tuning.hpp"
#include "engine/intents.hpp"
#include "engine/watchdog.hpp"
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

class Engine final : public AcquireCounting,
                     public KindContext,
                     public EngineTuning,
                     public OwnerStripes,
                     public Intents {
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
  // Validates (std::invalid_argument, before any SQL) and fixes the
  // deadline now. lease: nullopt = watchdog mode; wait: nullopt = forever,
  // <= 0 = one attempt. `bound`: a semaphore's.
  AcquireRequest make_request(NameKeyView key, std::uint64_t owner, std::optional<Millis> lease,
                              std::optional<Millis> wait, std::uint32_t bound = 0);
  // One attempt, and what to do next. Throws LockLostError, BackendError,
  // and what the kind's check throws.
  AcquireStep attempt_step(const AcquireRequest& request);
  // The blocking driver of every wait (wait.cpp). `interrupted` (may be
  // null) is checked at every wake-up; once true the wait gives up at the
  // next one (interrupt_waits wakes them). Returns the last step (kAcquired
  // or kGaveUp). drive() waits for an acquire request.
  AcquireStep wait(Wait& wait, const std::atomic<bool>* interrupted = nullptr);
  AcquireStep drive(const AcquireRequest& request, const std::atomic<bool>* interrupted = nullptr);
  void wait_ended(Wait& wait, bool done) noexcept;  // its ended(), logged if it throws
  // Releases one hold of `owner` on `key`; the last leaves the name taken
  // until `at_least` after the grant (server clock). NotHeldError (before
  // any SQL) when there is none; never throws for database trouble.
  void release(NameKeyView key, std::uint64_t owner, Millis at_least = Millis::zero());
  // A release's count-off, for a caller that took the count out of the
  // registry (`before`, as it was) under the owner's stripe: a lost hold's
  // count just goes, a nested one counts down in the database. True when
  // it was a live hold's last: free its row (free_rows).
  bool ends_hold(HoldKind& k, NameKeyView key, std::uint64_t owner, const Hold& before);
  // Frees the rows of those holds (not of a kind that frees_alone): one
  // statement per bell session, ringing its bell in that statement when the
  // session is idle, else when it is. Losses found are reported, local
  // waiters woken; never throws for database trouble (logged).
  void free_rows(const std::vector<std::pair<NameKey, Hold>>& last);
  // The owner stripes of `keys` for `owner`, locked in one order, so two
  // callers locking overlapping keys never deadlock.
  std::vector<std::unique_lock<std::mutex>> lock_stripes(const std::vector<NameKey>& keys, std::uint64_t owner);
  // Throws LockLostError for `key`'s hold, counted lost and still owed unlock().
  [[noreturn]] void throw_lost(NameKeyView key, std::uint64_t fence) const;
  // The bell watcher (null without fast wake-up).
  BellWatcher* bells() const { return bells_.get(); }
  void post_io(std::string what, IoThread::Task task) override { io_.post(std::move(what), std::move(task)); }
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
  std::optional<Hold> local_hold(NameKeyView key, std::uint64_t owner) const override;
  // Wakes every local waiter of `key` so each looks at its `interrupted`.
  void interrupt_waits(NameKeyView key) { waiters_.wake_all(key); }
  // Drivers: a waiter subscribed / the last one of `key` left (`acquired`:
  // the last one left holding it).
  void waiting_started(const AcquireRequest& request);
  void waiting_ended(const NameKey& key, bool acquired);

  WaiterRegistry& waiters() override { return waiters_; }
  AsyncOperations& async() { return async_; }
  HoldRegistry& holds() { return holds_; }
  const Options& options() const override { return options_; }
  const std::shared_ptr<spdlog::logger>& logger() const override { return logger_; }
  const HoldRows& rows() const override { return rows_; }
  const Schema& schema() const { return schema_; }
  HoldKind& kind(Kind k) const override;
  bool take_reconciled(HoldKind::Taken& t, NameKeyView key, std::uint64_t hold_id, TakeLearns learns,
                       const std::function<bool(Connection&, const std::string* bell)>& statement) override;

  // ---- waiting clients' intents (HoldKind::Traits::intents)
  //
  // Sets this client's intent on `key`'s row; recorded only if the intent
  // is this client's now (another client's live intent is left alone: the
  // poller tries again). Best effort.
  void set_intent(NameKeyView key);
  Millis intent_lease() const override;
  bool intends(NameKeyView key) const override { return has_intent(key); }

  void renew_now(const IoThread::ConnectionSource& connection) override { watchdog_.tick(connection); }

  // ---- losses: the one path every finder of a loss takes
  // Marks the hold of `generation` lost and reports it, once: counted, its
  // bell rung, logged, on_lock_lost called (clock thread), its waiters
  // woken. The cause: kTakenOver if `taken_over` (the row showed another
  // live holder), else kForced while its local lease ran, else kLeaseRanOut.
  void note_lost(NameKeyView key, std::uint64_t owner, std::uint64_t generation, const char* why,
                 bool taken_over = false);
  // The same for a hold its release took out of the registry (`released`,
  // as it was) and then found lost: reported from that.
  void note_lost(NameKeyView key, const Hold& released, const char* why, bool taken_over = false);
  void hint_free_if_held_here(NameKeyView key) override;

  // Everything counted, with the gauges read now (metrics.cpp).
  Metrics metrics() const;
  ConnectionPool& pool() { return pool_; }

 private:
  // One attempt: nullopt when it acquired, else what refused it.
  std::optional<HoldKind::Refusal> attempt(HoldKind& k, const AcquireRequest& r);
  AcquireStep wait_uncounted(Wait& wait, const std::atomic<bool>* interrupted);
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
  // The one place a release rings in its own statement (release.cpp).
  using RingingFree = std::function<std::size_t(Connection&, bool& rang)>;
  std::optional<std::size_t> free_on_bell_session(std::uint64_t session, std::string_view name, std::size_t count,
                                                  const std::function<Verdict(Connection&)>& gone,
                                                  const RingingFree& free_there, bool& rang);
  void report_row_losses(const std::vector<HeldRow>& rows, const std::vector<Hold>& holds, SteadyTime sent);
  void rang_for_waiters_elsewhere(NameKeyView key);
  void restamp_after_ring(Connection& c, const std::string& rung);
  void free_quietly(HoldKind& k, const RowKey& row, std::uint64_t hold_id);
  // note_lost's body, for a hold no longer live in the registry.
  void report_loss(NameKeyView key, const Hold& hold, const char* why, bool taken_over);
  void notify_lost(std::string_view name, std::uint64_t fence);
  // The clock's tick: counts lost every hold whose deadline has passed;
  // returns the next deadline.
  SteadyTime count_due_losses();
  // Clears this client's intent on `key`: at once when its waiters
  // gave up (others may go now), on the io thread when one acquired (the
  // hold keeps others out meanwhile, and the acquire returns sooner).
  void drop_intent(const NameKey& key, bool acquired);
  void clear_intent_on(const NameKey& key, Connection& c);
  // Wakes every waiter of the other side of `key`'s primitive, if it has one.
  void wake_other_side(NameKeyView key);
  // Before a release of `key`: clears an intent still left by its acquire.
  void clear_intent_before_release(NameKeyView key);
  // Clears `key`'s pending intent, or waits for a clear of it in flight.
  void clear_pending_intent(NameKeyView key, const std::function<Connection&()>& connection);
  Millis renew_period() const;
  void poll_tick(const IoThread::ConnectionSource& connection);
  void release_all_at_shutdown();
  friend class Watchdog;

  std::atomic<bool> closing_{false};  // no on_lock_lost from here on
  bool started_ = false;              // start() completed: there may be holds and rows to release
  const Options options_;
  const std::shared_ptr<spdlog::logger> logger_;
  const ConnectionSettings settings_;
  const HoldRows rows_;
  const Schema schema_;
  ConnectionPool pool_;
  HoldRegistry holds_;
  WaiterRegistry waiters_;
  std::array<std::unique_ptr<HoldKind>, 8> kinds_;
  NameNotes yields_;            // fresh takes here hold back until the note ends
  NameNotes free_hints_;        // seen free while a local hold looked live
  NameNotes waited_elsewhere_;  // releases ring first while noted
  Watchdog watchdog_{*this};
  ClockThread clock_;  // stopped first in the destructor
  IoThread io_;  // stopped in the destructor once the watcher has stopped
  std::unique_ptr<BellWatcher> bells_;  // null without fast wake-up; stopped first in the destructor, destroyed after io_ stops
  AsyncOperations async_;               // shut down first in the destructor
};

}  // namespace dlock::details
