// What the engine needs from one kind of hold: its statements and its rule
// of who may have it. Everything else (waiting, re-entry, release, direct
// handoff, renewal, polling, wake-ups, losses, reconciling an unknown
// outcome) is the engine's, written once for every kind. A kind sees the
// engine only as a KindContext (kind_context.hpp).
//
// A kind is an object per client (it may keep per-client state: the
// semaphore the bounds its waiters ask with, the read-write lock its reader
// slots). Every kind is in src/primitives/ (kinds.hpp: the lock, the fair lock,
// the semaphore, the two sides of the read-write lock, the election); the
// rows each one keeps are listed in base/kinds_table.hpp.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/keys.hpp"
#include "engine/holds.hpp"
#include "engine/request.hpp"
#include "sql/hold_rows.hpp"
#include "wakeup/wake_policy.hpp"

namespace dlock::details {

class KindContext;
class WaiterRegistry;

class HoldKind {
 public:
  struct Traits {
    Kind kind{};  // every kind sets it, and `serial`
    // Owner stripes (Engine::owner_mutex) are shared by the kinds of one
    // primitive: an owner's read and write acquires of one name look at
    // each other (a downgrade, an upgrade).
    Kind serial{};
    // The same owner acquiring again counts up its hold. A semaphore's
    // acquires are separate permits.
    bool reentrant = true;
    // At most one live hold per name: an attempt refused by a holder of
    // this client asks no SQL until that hold ends, and a chain of local
    // handoffs yields to waiters elsewhere when it ends.
    bool single_holder = true;
    // Holds share the name (the read side): a bell rung for it wakes every
    // waiter here, not one.
    bool shared = false;
    // The other side of the same primitive (the read-write lock's): a
    // force-unlock wakes its waiters too, and so does the end of this
    // side's intent (the readers a waiting writer held back).
    std::optional<Kind> other_side;
    // Its release is a statement of its own, not the shared free (the read
    // side also uncounts the hold on its head row): freed through the kind
    // at shutdown, never by Engine::free_rows.
    bool frees_alone = false;
    // A full release may hand the hold straight to a local waiter.
    bool hands_over = true;
    // What each take (or handoff) adds to the fence.
    int fence_step = 1;
    // on_lock_lost gets the hold's fence (else 0: a semaphore's).
    bool reports_fence = true;
    // Whether a waiting client sets its intent on the row (intent_id) so that it goes
    // next: never; as soon as a waiter is refused (the write side: readers
    // that do not read yet wait behind it); or when the poll finds the name
    // held by another hold than at the previous poll and no bell is watched
    // for it (fast wake-up off, a holder without a bell, a waiter on another
    // Galera node, more waited names than bell connections): a waiter that
    // is not rung would otherwise lose every race to the holder's own
    // threads, who hand the name to each other.
    enum class Intent { kNone, kWhenRefused, kWhenNotRung };
    Intent intents = Intent::kNone;
    // The kinds of rows whose holds keep its waiters out (BellWatcher).
    std::vector<Kind> blocked_by;
    // Waiters queue in the database (the fair lock): every waiter asks the
    // database on every wake, even while a hold of this client blocks it,
    // and a release wakes every local waiter (the one it granted to may be
    // any of them).
    bool queues = false;
    // Watchers of the name (an election's observers) are told of every
    // fresh take here, not only of releases: the new holder is news.
    bool takes_are_news = false;
    // How waiting clients take turns watching a hold of another client
    // (wakeup/wake_policy.hpp): all at once, in line, or each behind the
    // queue entry before its own (then queue_place says where).
    WakePolicy wake = WakePolicy::kEveryone;
  };

  explicit HoldKind(Traits t) : traits(std::move(t)) {}
  virtual ~HoldKind() = default;
  HoldKind(const HoldKind&) = delete;
  HoldKind& operator=(const HoldKind&) = delete;

  const Traits traits;

  // Before any SQL, for an owner that holds none of this kind on the name:
  // throws for misuse (the write side: an upgrade).
  virtual void check(KindContext&, const AcquireRequest&) {}

  struct Refusal {
    std::int64_t ttl_us = 0;  // the blocking holds end within this (0: try again at once)
    bool foreign = false;     // a hold of another client blocks: watch its bell
  };
  struct Taken {
    bool taken = false;
    std::uint64_t slot = 0;
    std::uint64_t fence = 0;         // 0: not known yet (read when asked for)
    std::uint64_t bell_session = 0;  // the session whose bell the row records
    std::uint64_t hold_id = 0;       // the hold's id if not the Holder's (granted to a queued waiter)
    std::optional<std::int64_t> ttl_us;  // the lease left, if not the request's whole lease
    std::optional<HoldRow> seen;     // a row read while refusing, if any
    std::optional<Refusal> refusal;  // what the take learned of the refusal, if anything
    bool cleared_intent = true;      // the take cleared this client's intent on the row, if any
  };
  // One take of a fresh hold for `holder`, reconciling an unknown outcome
  // (Engine::run_reconciled). Throws BackendError.
  virtual Taken take(KindContext&, const AcquireRequest&, const Holder& holder) = 0;
  // After a refused take of a request that waits: what blocks it.
  virtual Refusal refused(KindContext&, const AcquireRequest&, const Taken&) = 0;

  // Re-entry of a live hold (HoldRows::retake).
  virtual bool retake(KindContext&, Connection&, const RowKey&, std::uint64_t hold_id, unsigned count,
                      std::int64_t lease_us, bool watchdog);
  // Frees a live hold (HoldRows::free).
  virtual bool free(KindContext&, Connection&, const RowKey&, std::uint64_t hold_id, std::int64_t at_least_us,
                    HoldRows::Marks marks, bool ring);
  // The direct handoff (traits.hands_over): live hold `from` becomes `to`,
  // `request`'s, count 1, fence moved on, in one statement; a row already
  // carrying `to` is matched too (its own earlier run). False: `from` is
  // not live (or the rule refuses the handoff now).
  virtual bool hand_over(KindContext&, Connection&, const RowKey&, std::uint64_t from, std::uint64_t to,
                         const AcquireRequest& request);
  // Whether hold `held` may be handed to `request` at all.
  virtual bool fits(const Hold& held, const AcquireRequest& request) const;
  // Wakes the local waiters a full release or a loss of a hold of `name`
  // lets in (one waiter of this kind).
  virtual void wake(WaiterRegistry&, std::string_view name);
  // The poller: looks at the waited-for `names` in one statement per chunk
  // and wakes the waiters that may get in now. Returns the names still held
  // (a kind whose waiters set intents when not rung: only those its waiters
  // lost a race for, on which they then set one).
  virtual std::vector<std::string> poll(KindContext&, Connection&, const std::vector<std::string>& names) = 0;
  // A driver subscribed a waiter for `request` / the last waiter of `key`
  // left.
  virtual void waiting_started(KindContext&, const AcquireRequest&) {}
  virtual void waiting_ended(KindContext&, const NameKey&) {}
  // A request ended (acquired, gave up, cancelled or failed), whichever
  // driver ran it: what it left in the database for its
  // wait goes (traits.queues: its queue entry).
  virtual void request_ended(KindContext&, const AcquireRequest&, bool /*acquired*/) {}

  // Any owner holds `name` (one read); the longest lease left on it.
  virtual bool is_locked(KindContext&, std::string_view name) = 0;
  virtual std::optional<std::int64_t> ttl_us(KindContext&, std::string_view name) = 0;
  // Frees every hold of `name`; how many.
  virtual std::size_t force(KindContext&, Connection&, std::string_view name);
  // This client's intents (Traits::intents) on `names`, set or renewed
  // for `lease_us`; returns the names it holds an intent on now.
  // Default: the row's one intent (intent_id), unless another client's is
  // live there (HoldRows::set_intent).
  virtual std::vector<std::string> set_intents(KindContext&, Connection&, const std::vector<std::string>& names,
                                        std::int64_t lease_us);
  // Takes this client's intent off `name`.
  virtual void clear_intent(KindContext&, Connection&, std::string_view name);
  // The hold in `slot` of `name` is gone for good without a release by its
  // kind (it was lost, and its owner made its last unlock() call).
  virtual void dropped(std::string_view /*name*/, std::uint64_t /*slot*/) {}
  // Rows other than this client's holds that recorded the bell of pooled
  // session `session` (a fair lock's queue entries, and the head a grant
  // copies an entry's bell into): a ring moves them to the session's next
  // bell with its holds. Default: none.
  virtual void rows_with_bell_of(std::uint64_t /*session*/, std::vector<HeldRow>& /*out*/) {}
  // WakePolicy::kChain: this client's place in the queue of `name`, read
  // on `c` (a bell connection). Default: none.
  virtual QueuePlace queue_place(KindContext&, Connection&, std::string_view /*name*/) { return {}; }
  // A bell round of `name` with no live blocker and only watchers waiting:
  // parks `c` until a take interrupts it, at most `seconds`, unless
  // `still_free()` (a read of the blockers) shows a take came first.
  // nullopt (default): this kind does not park (its takes are heard).
  virtual std::optional<Parked> park(KindContext&, Connection&, std::string_view /*name*/, int /*seconds*/,
                                     const std::function<bool()>& /*still_free*/) {
    return std::nullopt;
  }
  // Every poll interval, on the io thread, whether or not anyone waits.
  virtual void maintain(KindContext&, const std::function<Connection&()>&) {}
  // How many names this kind keeps per-client state for (tests: it stays
  // bounded).
  virtual std::size_t names_kept() const { return 0; }
  // At shutdown, after the client's holds were freed.
  virtual void shutdown(KindContext&, Connection&) {}
};

}  // namespace dlock::details
