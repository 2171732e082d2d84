// Every statement dlock issues against the lock table, and nothing else.
//
// One row per lock name, never deleted (so the fence survives everything).
// Expiry is computed and compared by the server alone: NOW(6) + lease.
// Hold counts are written as absolute values chosen by the client ("state =
// 3"), never as "state + 1", so re-running a statement whose first run may
// or may not have happened cannot make the count drift.
//
// Each hold is identified by a random 64-bit hold id (for a lock taken by a
// Client: its 16-bit tag, then 48 random bits), written with the row
// when the hold is taken from free and checked by every later statement of
// that hold (reacquire, release, renew). It is what makes two client
// instances distinct owners even when they share a machine_id (a label for
// operators), and what lets a reconciling read tell "this very statement
// applied" from "some earlier hold of mine is in the row".
//
// Each method runs one statement (the IN-list methods one per chunk of up to
// kChunk names), retries deadlocks and lock-wait timeouts itself while the
// calling thread's CallBudget allows another full lock wait, and throws
// BackendError otherwise. After a connection error it marks the connection
// broken; the caller owns the decision of how to reconcile.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sql/connection.hpp"

namespace spdlog {
class logger;
}
namespace sql {
class ResultSet;
}

namespace dlock::details {

// Who writes a hold into a row.
struct Holder {
  std::string_view label;  // machine_id column: the client's label, for operators
  std::uint64_t owner;     // thread_id column: the owner within that client
  std::uint64_t hold_id;   // hold_id column: random, one per acquisition from free
  std::string_view host;   // holder_host column: the client's host name (operators)
  std::uint32_t pid = 0;   // holder_pid column: the client's process id (operators)
};

// A hold this client has on a name, as the IN-list statements bind it.
struct NamedHold {
  std::string name;
  std::uint64_t hold_id = 0;
};

// A lock row as seen by one read.
struct LockRow {
  std::string name;
  bool exists = false;
  // Locked and unexpired by the server's clock.
  bool held = false;
  std::string machine;  // the holder's label; empty when free
  std::uint64_t thread = 0;
  std::uint64_t hold_id = 0;  // 0 when free
  std::string host;           // the holder's host name and process id; empty / 0 when free
  std::uint32_t pid = 0;
  std::string acquired_at;    // server time (UTC) the hold was taken, "YYYY-MM-DD hh:mm:ss.ffffff"
  std::optional<std::int64_t> held_for_us;  // since acquired_at; nullopt when free
  unsigned state = 0;
  std::uint64_t fence = 0;
  // Microseconds of lease left (negative when expired); nullopt when free.
  std::optional<std::int64_t> ttl_us;
  bool watchdog = false;

  // Held, unexpired, by the hold with this id.
  bool held_by(std::uint64_t id) const { return held && id != 0 && hold_id == id; }
};

// A LockRow from the current row of `rs`, whose columns from `first` on are,
// in order: name, machine_id, thread_id, state, held (1/0), fence, lease
// left (us), watchdog, hold_id, holder_host, holder_pid, acquired_at
// (formatted), held for (us). Every table with holds lists them so.
LockRow to_lock_row(sql::ResultSet& rs, int first = 1);

enum class AcquireResult {
  kRefused,   // someone else holds it
  kInserted,  // first use of the name: fence is 1
  kTaken,     // taken over a free or expired row (or this very statement's own
              // earlier run, when reconciling): fence bumped
};

class LockTable {
 public:
  static constexpr std::size_t kChunk = 512;  // = kInListChunk (statement.hpp)

  // `logger` (may be null) gets a warning for every retried statement.
  explicit LockTable(std::string table, std::shared_ptr<spdlog::logger> logger = nullptr);

  const std::string& table() const { return table_; }
  std::string create_table_sql() const;
  // The columns this version added to the table, as ADD COLUMN clauses.
  // A table missing some of them is upgraded with one ALTER TABLE adding
  // those (`dlock init`, or a client with create_table on).
  std::string upgrade_sql(const std::vector<std::string>& missing) const;
  static const std::vector<std::string>& added_columns();
  // CREATE TABLE IF NOT EXISTS, then the upgrade when the table lacks it.
  void create_table(Connection& c) const;
  // Throws BackendError naming `dlock init` when the table lacks a column
  // this version needs (create_table off and an older table).
  void check_schema(Connection& c) const;

  // Fresh acquire (the caller holds no live hold): one upsert that inserts the
  // row on first use, or takes it if free or expired. Bumps the fence on
  // every take. Sets state = `state` and hold_id = holder.hold_id. A row
  // that already carries holder.hold_id is taken too: that is this very
  // statement's earlier run, re-run after its outcome was unknown (a fresh
  // hold id never matches a live row, so a live hold of another client, or
  // of this one, is never taken).
  //
  // `bell` (may be null: none): the session bell of `c` (see doorbell.hpp,
  // "Session bells"), written into the row with the hold; the take also
  // clears the row's waiters mark. A plain value: no user-lock call.
  AcquireResult acquire(Connection& c, std::string_view name, const Holder& holder, unsigned state,
                        std::int64_t lease_us, bool watchdog, const std::string* bell) const;
  // Fresh acquire of a row known to exist: one conditional UPDATE (cheaper
  // than the upsert's insert-then-duplicate path). Same taking rule and
  // effects as acquire(). False: refused, or the row does not exist.
  bool take(Connection& c, std::string_view name, const Holder& holder, unsigned state, std::int64_t lease_us,
            bool watchdog, const std::string* bell) const;
  // Reentrant acquire: only while hold `hold_id` is live. Sets state =
  // `state`, restarts the lease, keeps the fence. False: the hold is gone.
  bool reacquire(Connection& c, std::string_view name, std::uint64_t hold_id, unsigned state, std::int64_t lease_us,
                 bool watchdog) const;
  // Release down to `state` (0 frees the row, whatever waiters marked it,
  // and rings nothing), only while hold `hold_id` is live. False: the hold
  // was already lost.
  bool release(Connection& c, std::string_view name, std::uint64_t hold_id, unsigned state) const;
  // Frees the row of live hold `hold_id` only if no waiter marked it: the
  // uncontended release. False: marked, or the hold was already lost (the
  // caller then frees it with release_ringing or release, which tell).
  bool release_unwaited(Connection& c, std::string_view name, std::uint64_t hold_id) const;
  // Frees the row of live hold `hold_id` and rings `c`'s session bell in the
  // same statement: takes the session's next bell, then gives back the
  // current one, which wakes every session blocked on it. `c` must hold a
  // bell (c.bell.current() not empty). `only_marked`: only if a waiter
  // marked the row. On success the session's bell advances; other rows that
  // recorded the old one need restamp(). False: nothing was freed and
  // nothing rang (the hold was already lost; or, with `only_marked`, the
  // row is not marked). A failure marks `c` broken (which bell the session
  // holds is unknown then; closing it gives back whatever it holds).
  bool release_ringing(Connection& c, std::string_view name, std::uint64_t hold_id, bool only_marked) const;
  // Rings `c`'s session bell on its own (a release that ran on another
  // session, a lost hold): next taken, current given back. Nothing if `c`
  // has no bell.
  void ring(Connection& c) const;
  // Rows of `holds` that still record bell `from` record `to` instead (after
  // a ring advanced their session's bell). Returns how many moved.
  std::size_t restamp(Connection& c, const std::vector<NamedHold>& holds, const std::string& from,
                      const std::string* to) const;
  // Direct handoff: the live hold `from` (this client's, releasing its last
  // count) becomes hold `to` of `owner` (same client) with count 1, the
  // given lease and mode, and the fence one greater, in one statement: the
  // row is never free in between. The row's bell and waiters mark stay: the
  // new hold is rung from the old one's session.
  // A row already carrying `to` is matched too, without a second fence
  // increment: that is this very statement's earlier run, re-run after its
  // outcome was unknown. False: neither hold is live (`from` was lost).
  bool hand_over(Connection& c, std::string_view name, std::uint64_t from, std::uint64_t to, std::uint64_t owner,
                 std::int64_t lease_us, bool watchdog) const;
  // `c`'s session bell, taken first if this session has not tried yet (one
  // GET_LOCK per session, ever; see sql/session_bell.hpp). Null when the
  // session has none (taking it failed). Throws OutcomeUnknown only if the
  // connection died meanwhile.
  const std::string* session_bell(Connection& c) const;
  // Per-name doorbells (semaphore permits and read-write locks, see
  // doorbell.hpp): takes one, never waiting. True if this session has it.
  bool take_doorbell(Connection& c, const std::string& doorbell) const;
  // Gives back a doorbell this session may hold (a lost hold's). Harmless if
  // it holds none.
  void drop_doorbell(Connection& c, const std::string& doorbell) const;

  enum class Ring {
    kRung,         // the doorbell was given back while we waited (or just before)
    kNoDoorbell,   // nothing to block on: the hold is live but its doorbell
                   // is free (its holder has none, or a ring is in flight)
    kTimedOut,     // still held after `wait_seconds`
    kInterrupted,  // KILL QUERY (or an error the server reports as such)
    kReleased,     // wait_for_release only: the row has no live hold now
  };
  // Waiter side of a per-name doorbell: blocks until the doorbell is given
  // back, at most `wait_seconds`, and gives it back at once so every
  // waiting client hears the same release. One statement.
  Ring wait_for_doorbell(Connection& c, const std::string& doorbell, int wait_seconds) const;
  // Waiter side of a lock row's session bell: reads the row, marks its live
  // hold as waited for (so its release rings; matched by the bell, so a
  // hold a local handoff made from it is marked too), and blocks on the
  // bell the row records as wait_for_doorbell does. Two or three statements (one or
  // two more when the mark or the bell says the hold may have ended: the row
  // is read again). kReleased: the row has no live hold, or a hold `ours`
  // says is this client's own (its release wakes the waiter here).
  Ring wait_for_release(Connection& c, std::string_view name, int wait_seconds,
                        const std::function<bool(std::uint64_t hold_id)>& ours) const;
  // A waited-for row as wait_for_release reads it.
  struct Watched {
    bool live = false;        // a live hold (the rest is set only then)
    std::uint64_t hold_id = 0;
    bool marked = false;      // waiters = 1
    std::string bell;         // empty: none
  };
  Watched watched(Connection& c, std::string_view name) const;
  // How the wait statement begins, as PROCESSLIST shows it
  // (interrupt_doorbell_wait recognises our waits by it).
  static constexpr const char* kDoorbellWaitPrefix = "SELECT IF(IS_FREE_LOCK(";
  // Renews these live watchdog-mode holds (each matched by name and hold
  // id). Returns how many rows were renewed.
  std::size_t renew(Connection& c, const std::vector<NamedHold>& holds, std::int64_t lease_us) const;
  // The same, skipping rows another transaction has locked instead of
  // waiting for them (SELECT ... FOR UPDATE SKIP LOCKED, then the UPDATE,
  // in one transaction): the watchdog's fallback after a lock wait timeout,
  // so one row locked by a foreign transaction cannot starve the others.
  std::size_t renew_skipping_locked(Connection& c, const std::vector<NamedHold>& holds, std::int64_t lease_us) const;
  // Names among `names` whose rows are free or expired now.
  std::vector<std::string> free_among(Connection& c, const std::vector<std::string>& names) const;
  // The row of `name` (exists == false if never used).
  LockRow read(Connection& c, std::string_view name) const;
  // Rows of `names` that exist.
  std::vector<LockRow> read_many(Connection& c, const std::vector<std::string>& names) const;
  // Every held row, ordered by name (operator tools).
  std::vector<LockRow> read_held(Connection& c) const;
  // Clears any live hold on `name`. True if one was cleared.
  bool force_release(Connection& c, std::string_view name) const;
  // Frees these holds (shutdown).
  std::size_t release_all(Connection& c, const std::vector<NamedHold>& holds) const;

 private:
  // Runs `body`, retrying deadlocks and lock-wait timeouts within the call's
  // budget.
  template <class Body>
  auto run(Connection& c, const char* what, Body&& body) const;
  std::string renew_sql(std::size_t bucket) const;

  std::string table_;
  std::shared_ptr<spdlog::logger> logger_;
  std::string quoted_;
  std::string acquire_sql_;
  std::string reacquire_sql_;
  std::string take_sql_;
  std::string release_sql_;
  std::string hand_over_sql_;
  std::string free_row_sql_;
  std::string free_unwaited_sql_;
  std::string free_ringing_sql_;
  std::string free_ringing_marked_sql_;
  std::string restamp_sql_;
  std::string mark_sql_;
  std::string watched_sql_;
  std::string free_sql_;
  std::string read_sql_;
  std::string force_sql_;
  std::string release_all_sql_;
};

}  // namespace dlock::details
