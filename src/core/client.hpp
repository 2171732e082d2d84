// details::Client implements DatabaseDistributedLock.
//
// Acquire: one statement when free (the upsert in LockTable::acquire) or
// reentrant (LockTable::reacquire). A waiting acquire subscribes to the
// name's WaiterRegistry entry first, then loops: attempt; on refusal read the
// holder's TTL; wait until woken or the TTL or the caller's deadline ends.
// attempt_step is that loop's body; a driver does the waiting: acquire()
// blocks the calling thread, AsyncAcquire parks a continuation (no thread).
//
// Holds: every acquisition from free draws a random hold id, written with
// the row; every later statement of that hold (reacquire, release, renew)
// matches it. So two clients are always distinct owners, whatever their
// machine_id labels, and a hold once lost is never matched again. An owner
// whose hold was lost gets LockLostError from its next acquire of the name
// until it has made the unlock() calls it owes.
//
// Unknown outcomes: when a write's connection dies mid-statement, the row is
// read on a newly opened connection. The hold id identifies the very
// statement: the row shows it applied, or it did not (then the statement is
// run once more with the same hold id and absolute values, so even a first
// run that lands late cannot make the count drift or take a second hold).
//
// Time: each call runs under a CallBudget of io_timeout, which bounds its
// statement retries and pool waits in total.
//
// Background (io thread): the watchdog renews every live watchdog-mode hold
// in one statement per tick (per 512 names) and, when fewer rows than holds
// were renewed, reads them back to find which were lost; the poller checks
// every waited-for name in one statement per tick and wakes one waiter per
// free name.
//
// Direct handoff: a full release whose name has a local lock waiter hands
// the hold straight to it in one statement (LockTable::hand_over: new hold
// id and owner, fence + 1, the row never free), instead of freeing the row
// for the waiter to take: one commit instead of two. The waiter resumes
// holding the lock. Handoffs chain for at most kHandoffChain from the first
// one (one is always allowed); the release that ends a chain frees the row,
// and this client's fresh takes of the name hold back for kYieldAfterChain
// from just before that release, so a waiter in another client, rung by the
// doorbell, gets in. An unknown outcome is reconciled by reading the row's
// hold id (the new one: handed; the old one: run again; neither: the old
// hold was lost). A waiter refused because another owner of this client
// holds the name asks no SQL until that hold ends (HoldRegistry::
// live_deadline), unless the poller or a force-unlock here saw the row free
// meanwhile (a free hint). The write side of a read-write lock is handed
// over the same way (RwTable::hand_over_write: fence + 2, only while no
// read is counted), and so is a semaphore permit (SemaphoreTable::
// hand_over: the permit keeps its id and doorbell), with the same chain
// bound and hold-back.
//
// Fast wake-up (doorbell.hpp): fresh acquires record the session bell of the
// pooled session that ran them in the row, and the hold remembers which
// session that was; a full release frees an unmarked row anywhere, and a row
// marked by a waiter elsewhere on that session, ringing its bell in the same
// statement. Waiters arm the DoorbellWatcher after each refused attempt.
#pragma once

#include <array>
#include <atomic>
#include <mutex>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/acquire_request.hpp"
#include "core/async_operations.hpp"
#include "sql/connection_pool.hpp"
#include "core/thread_identity.hpp"
#include "wakeup/doorbell.hpp"
#include "dlock/options.hpp"
#include "core/hold_registry.hpp"
#include "core/io_thread.hpp"
#include "core/known_rows.hpp"
#include "core/name_marks.hpp"
#include "core/permit_registry.hpp"
#include "core/reader_slots.hpp"
#include "sql/lock_table.hpp"
#include "sql/rw_table.hpp"
#include "sql/semaphore_table.hpp"
#include "wakeup/waiter_registry.hpp"

namespace dlock::details {

class Client {
 public:
  explicit Client(Options options);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // Every operation acts for an explicit owner id (Owner::id(): a thread's,
  // or one made with Owner::create()); the public surface resolves
  // Owner::this_thread(). Operations of one owner on one name are
  // serialized (owner_mutex), so an owner used from several threads at once
  // still keeps an exact count.
  //
  // lease: nullopt = watchdog mode. wait: nullopt = forever; <= 0 = one attempt.
  // `interrupted` (may be null): checked at every wake-up; once true the
  // wait gives up (false) at the next one. interrupt_waits() wakes them.
  //
  // The synchronous driver of the acquire engine (acquire_request.hpp): it
  // blocks the calling thread between attempts. AsyncAcquire is the other.
  //
  // `side`: the mutex `name` (the default) or a side of read-write lock
  // `name` (client_rw.cpp); every operation below that takes one.
  bool acquire(std::string_view name, std::uint64_t owner, std::optional<Millis> lease, std::optional<Millis> wait,
               const std::atomic<bool>* interrupted = nullptr, LockSide side = LockSide::kMutex);

  // The engine, for both drivers. make_request validates (throws
  // std::invalid_argument, before any SQL) and fixes the deadline now. For
  // the write side of a read-write lock it throws std::logic_error when the
  // owner holds only the read side (an upgrade).
  AcquireRequest make_request(std::string_view name, std::uint64_t owner, std::optional<Millis> lease,
                              std::optional<Millis> wait, LockSide side = LockSide::kMutex) const;
  // One attempt for the request, and what to do next. On a refusal it arms
  // the doorbell watcher for a holder in another client. Throws LockLostError,
  // BackendError.
  AcquireStep attempt_step(const AcquireRequest& request);
  // The synchronous driver for any request (a lock hold or a permit):
  // attempts, blocking the calling thread between attempts on the request's
  // WaiterRegistry entry. Returns the last step (kAcquired or kGaveUp).
  AcquireStep drive(const AcquireRequest& request, const std::atomic<bool>* interrupted = nullptr);
  // A driver has subscribed its waiter for `request` (and has not made
  // its first attempt yet): a permit request's bound is noted for the
  // poller while the semaphore has waiters here.
  void waiting_started(const AcquireRequest& request);
  // A driver's waiter under `key` (AcquireRequest::waiter_key) has
  // unsubscribed: the last one of a lock name frees the doorbell connection
  // watching it for other names; the last one of a semaphore drops its
  // bound.
  void waiting_ended(const std::string& key);
  // Semaphores whose bound the poller knows now (tests: none once no one
  // waits).
  std::size_t semaphore_bounds_known();
  WaiterRegistry& waiters() { return waiters_; }
  // For tests: run on the acquiring thread when a blocking acquire's first
  // attempt was refused, before it subscribes to wakes (the window in which
  // a wake finds no subscriber; see drive()). Set it while no acquire runs.
  std::function<void()> refused_before_subscribing;
  // While one exists on a thread, that thread's statements take the
  // warmest idle pooled connection (most recently returned) rather than the
  // one the thread used last. For the asynchronous workers: a worker runs
  // any owner's step, so its last connection says nothing, and a connection
  // idle for long has a cold server thread (measured: +0.1-0.2 ms per
  // statement on a VM when each worker kept its own).
  class WarmestConnection {
   public:
    WarmestConnection();
    ~WarmestConnection();
    WarmestConnection(const WarmestConnection&) = delete;
    WarmestConnection& operator=(const WarmestConnection&) = delete;

   private:
    bool previous_;
  };
  AsyncOperations& async() { return async_; }
  // Wakes every local waiter of `name` so each looks at its `interrupted`
  // flag (the others just try again). Thread-safe; not async-signal-safe.
  void interrupt_waits(std::string_view name) { waiters_.wake_all(name); }
  void release(std::string_view name, std::uint64_t owner, LockSide side = LockSide::kMutex);
  bool force_release(std::string_view name, LockSide side = LockSide::kMutex);

  bool is_locked(std::string_view name, LockSide side = LockSide::kMutex);
  // The row of `name` as it is now (operator tools).
  LockRow inspect(std::string_view name);
  bool is_held_by(std::string_view name, std::uint64_t owner, LockSide side = LockSide::kMutex);
  int hold_count(std::string_view name, std::uint64_t owner, LockSide side = LockSide::kMutex);
  std::optional<Millis> remaining_ttl(std::string_view name, LockSide side = LockSide::kMutex);
  std::uint64_t fencing_token(std::string_view name, std::uint64_t owner, LockSide side = LockSide::kMutex);

  // ------------------------------------------------ read-write locks (client_rw.cpp)
  //
  // A write hold is the head row of the name (rw_table.hpp); a read hold is
  // one of this client's reader slot rows (ReaderSlots), counted on the
  // head. Both are registered in rw_holds_ under rw_key(side, name) and
  // renewed by the watchdog: all write holds in one statement per tick, all
  // read holds in another. Waiters use the WaiterRegistry under the same
  // keys; a write release wakes every local reader and one writer, a read
  // release one writer.
  //
  // Throws std::invalid_argument when the lock table's name leaves no room
  // for the read-write lock tables'.
  void validate_rw() const;
  // The read-write lock tables, created (or checked) on first use.
  const RwTable& rw_table();
  // Every head row with a live write or counted reads, and every live read
  // hold (operator tools).
  std::vector<RwHead> held_rw_heads();
  std::vector<ReaderRow> held_reads();
  // NUL, 'r' or 'w', the name: the waiter and hold key of a side.
  static std::string rw_key(LockSide side, std::string_view name);
  static bool is_rw_key(std::string_view key) {
    return key.size() >= 2 && key[0] == '\0' && (key[1] == 'r' || key[1] == 'w');
  }

  // ------------------------------------------------ semaphores (client_semaphore.cpp)
  //
  // A permit is one slot row of the semaphore table (semaphore_table.hpp),
  // owned by this client (no owner), registered in permits_ while held,
  // renewed by the watchdog in one statement per tick for all watchdog-mode
  // permits. Waiters use the WaiterRegistry under semaphore_key(name): a
  // release in this client wakes one at once; the poller checks every
  // waited-for semaphore in one statement per tick and wakes one waiter per
  // semaphore with a free permit.

  // Validates (std::invalid_argument, before any SQL: name, lease, a bound
  // of 1..100,000, and a lock table name short enough to name the semaphore
  // table after it) and fixes the deadline now.
  AcquireRequest make_permit_request(std::string_view name, std::uint32_t permits, std::optional<Millis> lease,
                                     std::optional<Millis> wait);
  // Throws std::invalid_argument when `permits` is out of 1..100,000 or the
  // semaphore table's name would be too long.
  void validate_semaphore(std::uint32_t permits) const;
  // Frees permit `id` of semaphore `name` and wakes a local waiter. Never
  // throws: database trouble is logged (the lease will end); a permit found
  // lost is logged and reported to on_lock_lost (fence 0). Unknown ids
  // (already released) do nothing.
  void release_permit(std::string_view name, std::uint64_t id) noexcept;
  // Unexpired permits of `name`, read from the database.
  std::uint32_t live_permits(std::string_view name);
  // Frees every live permit of `name` and wakes its waiters here; returns
  // how many were freed (operator tools).
  std::size_t force_release_semaphore(std::string_view name);
  // The slot row of live permit `id`, or nullopt when it is not live
  // (operator tools; one read).
  std::optional<PermitRow> permit_row(std::uint64_t id);
  // Every live permit in the database (operator tools).
  std::vector<PermitRow> held_permits();
  // The semaphore table, created (or checked) on first use. Throws
  // BackendError.
  const SemaphoreTable& semaphore_table();
  static std::string semaphore_key(std::string_view name) { return std::string("\0s", 2) + std::string(name); }
  static bool is_semaphore_key(std::string_view key) { return key.size() >= 2 && key[0] == '\0' && key[1] == 's'; }
  // The DoorbellWatcher key of one hold with a doorbell of its own: NUL,
  // `kind`, 16 hex digits of the hold's id, the name. Kind 'p': a permit of
  // semaphore `name`; 'q': a read hold of read-write lock `name`. Its
  // doorbell is doorbell_name() of that key, computed the same way by the
  // holder and every waiter. (A write side's doorbell key is
  // rw_key(kWrite, name); a lock's watcher key is its name, watched through
  // its row's session bell.)
  static std::string hold_bell_key(char kind, std::string_view name, std::uint64_t id);
  static std::string permit_bell_key(std::string_view name, std::uint64_t id) {
    return hold_bell_key('p', name, id);
  }
  // The WaiterRegistry key a DoorbellWatcher key rings: the semaphore's for
  // a permit, the write side's for a read hold, else the key itself (a
  // mutex's name, or a write side's key, which also rings its readers).
  static std::string waiter_key_of_bell(const std::string& key);

  // How long a chain of local handoffs may keep a name from other clients,
  // and how long this client then holds back its own fresh takes.
  static constexpr Millis kHandoffChain{50};
  static constexpr Millis kYieldAfterChain{5};
  // How long a name stays in waited_elsewhere_ after a release rang. A name
  // contended across clients is marked again by each ringing release; a
  // name nobody waits for any more is back to the quiet release first.
  static constexpr Millis kRingAtOnceFor{1'000};
  // Holds handed straight to a local waiter so far (tests, benchmarks,
  // the torture report).
  std::uint64_t handoffs() const noexcept { return handoffs_.load(std::memory_order_relaxed); }
  // Off: every release frees the row and wakes a waiter, which takes it
  // (release-then-take), for benchmarks to measure what handoffs buy. On by
  // default; not part of the public API.
  void enable_handoffs(bool on) noexcept { handoffs_enabled_.store(on, std::memory_order_relaxed); }
  // For tests whose chain of handoffs must not end at kHandoffChain on a
  // slow or loaded server (each step of such a test is a statement or a
  // wait): how long a chain may last from now on.
  void set_handoff_chain_for_tests(Millis bound) noexcept {
    handoff_chain_ms_.store(bound.count(), std::memory_order_relaxed);
  }

  const std::string& machine_id() const noexcept { return machine_id_; }
  const Options& options() const noexcept { return options_; }
  ConnectionPool& pool() { return pool_; }
  const LockTable& table() const { return table_; }

 private:
  struct Attempt {
    bool acquired = false;
    std::optional<std::int64_t> ttl_us;  // holder's lease left, when asked for
    bool held = false;                   // the row read after the refusal shows a live hold
    bool holder_is_local = false;        // held by an owner of this client
  };

  // One attempt for `owner`. Throws LockLostError when the owner's hold on
  // the name is (or is found) lost, BackendError on database failure.
  Attempt attempt(std::string_view name, std::uint64_t owner, Millis lease, bool watchdog, bool want_ttl);
  // Takes the row from free or expired for `holder`, with count `state`: a
  // conditional UPDATE when the row is known to exist, else the upsert.
  // Reconciles a lost connection. `row` gets the row read after a refusal
  // (exists == false if no read was needed), `fence` the token when the
  // statement reveals it (0 otherwise).
  // `doorbell_session` gets the session key of the session whose bell the
  // row records (0 if none, or the session died).
  AcquireResult acquire_fresh(std::string_view name, const Holder& holder, unsigned state, std::int64_t lease_us,
                              bool watchdog, LockRow& row, std::uint64_t& fence, std::uint64_t& doorbell_session);
  [[noreturn]] void throw_lost(std::string_view name, std::uint64_t fence) const;
  // The direct handoff at a full release of `before` (owner `owner`, whose
  // owner mutex the caller holds). `claimed` is the waiter claimed for it;
  // the caller resolves the claim in every case, once it has let go of the
  // owner mutex. kHanded: the hold is the waiter's (resolve as granted).
  // kLost: this hold was already lost, nothing was handed. kDeclined:
  // nothing was written; the caller releases as usual, and the claim's
  // resolution is the release's wake. Throws BackendError.
  enum class Handoff { kHanded, kLost, kDeclined };
  // At the full release of `before` (its waiters under `key`: a name, or
  // a write side's rw_key), with handoffs on: claims a local waiter while
  // the hold's chain of handoffs is within kHandoffChain; past it, marks
  // this client's own takes of `key` to hold back kYieldAfterChain if
  // anyone here waits (the release then frees and rings).
  // `chain_started`: the released hold's (or permit's).
  void claim_for_handoff(std::string_view key, SteadyTime chain_started, WaiterRegistry::ClaimedWaiter& claim);
  Handoff hand_over(std::string_view name, std::uint64_t owner, const Hold& before,
                    const std::shared_ptr<WaiterRegistry::Parked>& claimed);
  // Leaves a "seen free" hint on `name` if a local hold on it looks live
  // (the poller saw the row free, or a force-unlock here cleared it): that
  // hold is gone, and the next attempt asks the database.
  void hint_free_if_held_here(std::string_view name);
  // Frees the row of `before` (a full release, no handoff): only if no
  // waiter marked it; else ringing the bell of the hold's session (on that
  // session if it is idle, else freed anywhere and rung when it is). False:
  // the hold was already lost. Throws BackendError (OutcomeUnknown).
  bool free_row(std::string_view name, const Hold& before);
  // After a release that rang for a waiter elsewhere (it had marked the
  // row): the name's next releases ring first for kRingAtOnceFor, and this
  // client's fresh takes of it hold back for kYieldAfterChain, so the woken
  // waiter gets in.
  void rang_for_waiters_elsewhere(std::string_view name);
  // Rings the session bell of pooled session `session` as soon as that
  // session is idle: now, or when the thread using it returns it. Never
  // waits; best effort.
  void ring_when_idle(std::uint64_t session);
  // After `c`'s bell advanced from `rung`: the rows of this client's other
  // live holds recorded with `c`'s session get the new bell. Best effort.
  void restamp_after_ring(Connection& c, const std::string& rung);
  bool reacquire_reconciled(std::string_view name, std::uint64_t hold_id, unsigned state, std::int64_t lease_us,
                            bool watchdog);
  // Frees the row of hold `hold_id` (best effort, errors logged): used when
  // a statement re-took a hold that was meanwhile found lost locally.
  void free_quietly(std::string_view name, std::uint64_t hold_id);
  // The caller's hold as the database sees it now, or nullopt if it holds
  // none (detects and reports a loss). No SQL when there is no local hold.
  std::optional<Hold> confirmed_hold(std::string_view name, std::uint64_t owner, LockRow* row_out);
  void note_lost(std::string_view name, std::uint64_t owner, std::uint64_t generation, const char* why);
  // Logs a lost hold and notify_lost()s it.
  void report_lost(std::string_view name, std::uint64_t fence, const char* why);
  // Calls Options::on_lock_lost on the io thread (unless closing).
  void notify_lost(std::string_view name, std::uint64_t fence);
  // Logs a lost permit and notify_lost()s it with fence 0.
  void report_lost_permit(std::string_view name, const char* why);
  // Reads the row after an OutcomeUnknown, on a newly opened connection;
  // throws BackendError if even that fails.
  LockRow read_after_unknown(std::string_view name, const OutcomeUnknown& cause);
  // A pooled connection for the calling thread (see WarmestConnection).
  PooledConnection pooled_connection();
  template <class Fn>
  auto with_connection(Fn&& fn) {
    PooledConnection connection = pooled_connection();
    return fn(*connection);
  }
  // One read of the row. Reads change nothing, so a read whose connection
  // died is simply run again once on a fresh connection.
  LockRow read_row(std::string_view name);
  // The row read on a newly opened connection (after a connection fault,
  // when other pooled connections may be dead too).
  LockRow read_on_fresh_connection(std::string_view name);

  // The waiting step after a refusal: until the holder's lease ends
  // (`ttl_us`) plus a millisecond, or the caller's deadline; kGaveUp once
  // the deadline has passed.
  AcquireStep wait_step(const AcquireRequest& r, std::int64_t ttl_us);
  // One attempt for a permit (attempt_step's semaphore half).
  AcquireStep attempt_permit_step(const AcquireRequest& r);
  // Takes a slot (or adds one) for `holder`, reconciling a lost connection
  // by reading the permit's id. True: the permit is held.
  // `doorbell_session` gets the server id of the session that took the
  // permit's doorbell with it (0 if none).
  bool take_permit(std::string_view name, std::uint32_t permits, const PermitHolder& holder, std::int64_t lease_us,
                   bool watchdog, std::uint64_t& doorbell_session);
  // hand_over for permit `id` of semaphore `name` (`held`: what the
  // registry knew of it; the release has removed it). Handed: the claimed
  // waiter's permit under the same id, its doorbell on the same session.
  // The same outcomes; declined before any SQL for a waiter whose bound is
  // below the permit's, or when the permit's local lease has run out.
  Handoff hand_over_permit(std::string_view name, std::uint64_t id, const HeldPermit& held,
                           const std::shared_ptr<WaiterRegistry::Parked>& claimed);
  // Watches the doorbells of these holds (kind 'p': permits of semaphore
  // `name`; 'q': read holds of read-write lock `name`; of other clients)
  // for the waiters here, and stops watching the ones it watched for the
  // name and kind before that are not among them.
  void arm_hold_bells(char kind, const std::string& name, const std::vector<std::uint64_t>& ids);
  // Gives back a lost permit's doorbell (when its session is idle).
  void forget_permit_bell(const HeldPermit& permit, std::uint64_t id);
  // Gives back doorbell `bell` held by pooled session `session` as soon as
  // that session is idle.
  void drop_bell_when_idle(std::string bell, std::uint64_t session);
  void renew_permits_tick(const IoThread::ConnectionSource& connection);
  void poll_semaphores_tick(const IoThread::ConnectionSource& connection);

  // Runs `release(connection, bell)` (-> bool) for a full release whose
  // hold may have a doorbell on pooled session `session` (0: none): on that
  // session with the bell, so the statement rings it; if another thread is
  // using the session, on any connection without it, and the bell is given
  // back the moment the session is idle. Never waits for the session.
  template <class Release>
  bool release_ringing(std::uint64_t session, const std::string& bell, Release&& release) {
    if (session == 0) return with_connection([&](Connection& c) { return release(c, nullptr); });
    if (auto c = pool_.try_acquire_session(session)) return release(**c, &bell);
    struct RingLater {
      Client& client;
      const std::string& bell;
      std::uint64_t session;
      ~RingLater() { client.drop_bell_when_idle(bell, session); }
    } ring_later{*this, bell, session};
    return with_connection([&](Connection& any) { return release(any, nullptr); });
  }

  // ---- read-write locks (client_rw.cpp)
  AcquireStep attempt_rw_step(const AcquireRequest& r);
  // A reentrant acquire when the owner holds the side: true. Throws
  // LockLostError for a lost hold.
  bool reenter_rw(const AcquireRequest& r, const std::string& key);
  // Fresh takes; on a refusal `head` gets the head row read after it.
  bool take_write(const AcquireRequest& r, const std::string& key, RwHead& head);
  bool take_read(const AcquireRequest& r, const std::string& key, RwHead& head);
  // The hold row of a side (the writer of the head, or reader slot `slot`)
  // read on a newly opened connection after an unknown outcome.
  LockRow read_rw_after_unknown(LockSide side, std::string_view name, std::uint32_t slot,
                                const OutcomeUnknown& cause);
  LockRow read_rw_hold(LockSide side, std::string_view name, std::uint32_t slot);
  RwHead read_rw_head(std::string_view name, std::uint32_t slot = 0);
  // The doorbell of a hold of `side` (a read hold's is its own).
  std::string rw_bell(LockSide side, std::string_view name, std::uint64_t hold_id) const;
  void release_rw(std::string_view name, std::uint64_t owner, LockSide side);
  // hand_over for the write side of read-write lock `name` (the caller
  // holds `owner`'s write-side stripe); the same outcomes.
  Handoff hand_over_write(std::string_view name, std::uint64_t owner, const Hold& before,
                          const std::shared_ptr<WaiterRegistry::Parked>& claimed);
  bool force_release_rw(std::string_view name, LockSide side);
  bool rw_is_locked(std::string_view name, LockSide side);
  std::optional<Millis> rw_remaining_ttl(std::string_view name, LockSide side);
  std::uint64_t rw_fencing_token(std::string_view name, std::uint64_t owner, LockSide side);
  void free_rw_quietly(LockSide side, std::string_view name, std::uint32_t slot, std::uint64_t hold_id);
  void note_rw_lost(const std::string& key, std::uint64_t owner, std::uint64_t generation, const char* why);
  std::optional<Hold> confirmed_rw_hold(LockSide side, std::string_view name, std::uint64_t owner, LockRow* row);
  // This client's waiting-writer mark on `name` (RwTable::set_intent), and
  // its removal once no local writer waits for the name; best effort.
  void mark_intent(std::string_view name);
  // The statement that clears this client's writer mark on `name` (best
  // effort; the mark otherwise ends with its lease). Caller holds
  // intent_statements_mutex_.
  void clear_intent_statement(const std::string& name);
  void unmark_intent(const std::string& name);
  Millis intent_lease() const;
  void renew_rw_tick(const IoThread::ConnectionSource& connection);
  void poll_rw_tick(const IoThread::ConnectionSource& connection);
  void release_rw_at_shutdown();

  // The watchdog's tick: a third of watchdog_timeout.
  Millis renew_period() const;
  void renew_tick(const IoThread::ConnectionSource& connection);
  void poll_tick(const IoThread::ConnectionSource& connection);

  // Set first thing in the destructor: from then on no on_lock_lost
  // callback starts.
  std::atomic<bool> closing_{false};
  // Striped locks serializing one owner's operations on one name. A stripe
  // is held across the operation's statement, so two (name, owner) pairs
  // that share a stripe wait for each other's round trips: with 256
  // stripes, 16 threads on 16 names share one in about a third of runs; a
  // probe that did made 0.25 futex calls per cycle on them and 0.4 more
  // context switches per cycle than its raw statements (perf, 2026-11-26). With
  // 4,096 (160 KiB), 16 threads share one in about 3 % of runs, 64 in
  // about 40 %, and then only that pair waits.
  std::mutex& owner_mutex(std::string_view name, std::uint64_t owner);
  std::array<std::mutex, 4096> owner_mutexes_;
  const Options options_;
  const std::shared_ptr<spdlog::logger> logger_;
  const std::string machine_id_;
  const std::string host_ = host_name();  // written with each hold, for operators
  const std::uint32_t pid_;
  const LockTable table_;
  // Shared by every connection this client opens (pool, io thread,
  // doorbells), so they follow one ServerChoice when there are failover
  // servers.
  const ConnectionSettings settings_;
  ConnectionPool pool_;
  HoldRegistry holds_;
  // Null when the lock table's name leaves no room for the semaphore
  // table's (get_semaphore then throws std::invalid_argument).
  std::unique_ptr<const SemaphoreTable> semaphores_;
  std::mutex semaphore_table_mutex_;
  std::atomic<bool> semaphore_table_ready_{false};  // set once, under semaphore_table_mutex_
  PermitRegistry permits_;
  // The bound each waited-for semaphore was last asked with (the poller's
  // "has a free permit" test): noted after a waiter subscribes, dropped
  // when the last one unsubscribes (both under the mutex, so a drop never
  // undoes a newer waiter's note), so a client that waits on ever new
  // names does not grow for ever.
  std::mutex semaphore_bounds_mutex_;
  std::unordered_map<std::string, std::uint32_t> semaphore_bounds_;
  // The hold doorbell keys watched for each waited-for semaphore and write
  // side (keyed by kind + name).
  std::mutex hold_bells_mutex_;
  std::unordered_map<std::string, std::vector<std::string>> hold_bells_;
  // Read-write locks. Null when the lock table's name leaves no room for
  // their tables' (get_read_write_lock then throws std::invalid_argument).
  std::unique_ptr<const RwTable> rw_;
  std::mutex rw_table_mutex_;
  std::atomic<bool> rw_table_ready_{false};
  const std::uint64_t client_key_;  // this client's reader slot rows and intents
  // The top 16 bits of every lock hold id this client makes (the other 48
  // are random): a waiter tells a hold of its own client from the row alone,
  // even before the holder has recorded it, and never marks it for a ring
  // (its release wakes the waiter locally). Another client with the same
  // tag (1 in 65,536) only costs waits between the two the poll.
  const std::uint64_t hold_tag_;
  // A fresh lock hold id carrying hold_tag_.
  std::uint64_t tagged_hold_id() const;
  bool is_this_clients(std::uint64_t hold_id) const { return hold_id != 0 && hold_id >> 48 == hold_tag_; }
  HoldRegistry rw_holds_;
  ReaderSlots reader_slots_;
  KnownRows rw_heads_;  // head rows known to exist
  // Held around every statement that sets or clears this client's writer
  // marks, with the look at intents_ that decided it (taken before
  // intents_mutex_): the poller's renewal of a mark cannot land after the
  // unmark of a writer that stopped waiting meanwhile and leave readers
  // held back by a writer nobody is (a mark's lease is 3 poll intervals).
  std::mutex intent_statements_mutex_;
  std::mutex intents_mutex_;
  std::unordered_set<std::string> intents_;  // names this client has marked a waiting writer on
  WaiterRegistry waiters_;
  KnownRows known_rows_;
  std::atomic<std::uint64_t> handoffs_{0};
  std::atomic<bool> handoffs_enabled_{true};
  std::atomic<Millis::rep> handoff_chain_ms_{kHandoffChain.count()};  // see set_handoff_chain_for_tests
  // Names whose chain of handoffs just ended: fresh takes here hold back
  // until the mark expires.
  NameMarks yields_;
  // Names seen free while a local hold looked live (until taken).
  NameMarks free_hints_;
  // Names whose last release rang for a waiter elsewhere: for
  // kRingAtOnceFor, their releases try the ringing release first (one
  // statement while someone waits) instead of the quiet one (two then).
  NameMarks waited_elsewhere_;
  IoThread io_;  // destroyed (stopped) after the watcher, before the rest
  // Null when fast_wakeup is off. Reset first in the destructor: it sends
  // its KILL QUERYs through io_.
  std::unique_ptr<DoorbellWatcher> doorbells_;
  // Shut down first in the destructor: its operations use everything above.
  AsyncOperations async_;
};

}  // namespace dlock::details
