// Every statement dlock issues against the read-write lock tables, and
// nothing else.
//
// Two tables beside the lock table:
// - "<table>_rw", one head row per read-write lock name, never deleted: the
//   write hold (the lock table's columns), the fence, the read count, the
//   end of the longest read lease (read_expire), and a waiting writer's
//   intent (intent_id, intent_expire).
// - "<table>_rwr", reader slot rows: each client owns a few rows per name
//   (client_key = the client's random key, slot = 0, 1, ...: one per read
//   hold it has on the name at once), reused from hold to hold. A read hold
//   is a slot row carrying the hold's random id and an unexpired lease.
//
// The rule that keeps reads and writes apart is decided on the head row
// alone, under its row lock: a write is taken only while the read count is
// 0 or read_expire has passed; a read is taken only while no write is live
// (or the write is the same owner's: a downgrade) and no writer's intent is
// live. A read take and a read release change the head row and the slot row
// in one multi-table UPDATE, so the count moves with the slot. read_expire
// is raised by every statement that sets a reader's lease, so it is never
// earlier than any live read lease: once it has passed, every counted read
// has expired and the count may be forgotten (the next read starts it over,
// the next write clears it), each time in a new read epoch. A read is
// subtracted only in the epoch it was counted in, also when its owner
// unlocks it after losing it, so the count is never too low; it is too high
// only for a client that died holding reads, until read_expire passes or a
// refused writer finds no live read behind it (forget_stale_reads).
//
// Fencing: write tokens are even (fence + 2 per take); a read hold's token
// is the head's fence + 1, so it is above every write that ended before it
// and below every write taken after it, without the read writing the fence.
//
// In multi-table UPDATEs neither MySQL nor MariaDB promises an order for
// the assignments, so each one reads only columns no assignment changes
// (or its own). Each method runs one statement through run_statement's
// retry rule and throws BackendError, or OutcomeUnknown for a lost
// connection.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sql/connection.hpp"
#include "sql/lock_table.hpp"

namespace spdlog {
class logger;
}

namespace dlock::details {

// One client's reader slot row of a name.
struct ReaderSlot {
  std::uint64_t client_key = 0;
  std::uint32_t slot = 0;
};

// A head row as one read sees it.
struct RwHead {
  // The write side: exists (the head row exists), held (a live write),
  // the writer, its lease left, and `fence`, the last write token.
  LockRow writer;
  bool reads_counted = false;         // read count > 0 and read_expire not passed
  std::int64_t read_ttl_us = 0;       // until read_expire (when reads_counted)
  bool intent = false;                // a writer's intent is live
  std::uint64_t intent_id = 0;        // whose (a client key)
  std::int64_t intent_ttl_us = 0;
  bool slot_exists = false;           // the reader slot asked about exists
  // read_head only: ids of the (at most kFirstReaders) live read holds
  // whose leases end first.
  std::vector<std::uint64_t> first_readers;
};

// A reader slot row: `hold` in the lock table's shape (name, holder,
// state, lease, fence = the read token), plus its slot.
struct ReaderRow {
  LockRow hold;
  ReaderSlot slot;
};

// The poller's view of one waited-for name.
struct RwPoll {
  std::string name;
  bool write_free = false;   // no live write
  bool reads_free = false;   // no counted read
  bool intent_free = false;  // no live intent
};

class RwTable {
 public:
  static bool names_fit(const std::string& lock_table) { return lock_table.size() + 4 <= 64; }
  // Throws std::invalid_argument when "<lock_table>_rwr" is longer than 64.
  RwTable(const std::string& lock_table, std::shared_ptr<spdlog::logger> logger = nullptr);

  const std::string& head_table() const { return head_; }
  const std::string& reader_table() const { return readers_; }
  // Both CREATE TABLE IF NOT EXISTS statements, head first.
  std::vector<std::string> create_tables_sql() const;
  void create_tables(Connection& c) const;
  // Throws BackendError naming `dlock init` when either table is missing.
  void check_schema(Connection& c) const;

  // Makes the head row of `name` if it does not exist (free, fence 0).
  void ensure_head(Connection& c, std::string_view name) const;
  // Makes reader slot row `slot` of `name` if it does not exist (free).
  void ensure_slot(Connection& c, std::string_view name, ReaderSlot slot) const;

  // ---- the write side (the head row)
  // Takes the write side for `holder` if no write is live and no read is
  // counted; bumps the fence by 2, forgets a stale read count, and clears
  // client `client_key`'s waiting-writer mark. False: refused, or no head
  // row. `doorbell` as in LockTable::take.
  bool take_write(Connection& c, std::string_view name, const Holder& holder, unsigned state,
                  std::int64_t lease_us, bool watchdog, std::uint64_t client_key, const std::string* doorbell) const;
  // Reentrant write: count `state`, lease restarted, while `hold_id` is live.
  bool retake_write(Connection& c, std::string_view name, std::uint64_t hold_id, unsigned state,
                    std::int64_t lease_us, bool watchdog) const;
  // Down to `state` (0 frees the write side, giving back `doorbell` in the
  // same statement when given), while `hold_id` is live. False: lost.
  bool release_write(Connection& c, std::string_view name, std::uint64_t hold_id, unsigned state,
                     const std::string* doorbell = nullptr) const;
  // Direct handoff of the write side: the live write `from` (this
  // client's, releasing its last count) becomes write `to` of `owner` (same
  // client) with count 1, the given lease and mode, and the fence 2
  // greater, in one statement: the write side is never free in between.
  // Only while no read is counted (as take_write; a read the releasing
  // owner took under its write, a downgrade, keeps the write from being
  // handed on). A head already carrying `to` is matched too, without a
  // second fence increment: this very statement's earlier run, re-run
  // after its outcome was unknown. The writer's doorbell stays with the
  // session that holds it, now the new write's; client `client_key`'s
  // waiting-writer mark is cleared, as by take_write. False: `from` is not
  // live, or a read is counted.
  bool hand_over_write(Connection& c, std::string_view name, std::uint64_t from, std::uint64_t to,
                       std::uint64_t owner, std::int64_t lease_us, bool watchdog, std::uint64_t client_key) const;
  // A count of reads with no live read behind it (a crashed client's,
  // until read_expire passes, which other reads keep raising): when no read
  // hold of `name` is live, sets the count to 0 in a new epoch. One
  // transaction: the head row locked first (no read can be taken while it
  // is), then the live reads counted with a locking read. Four statements;
  // run only when a writer is refused by a count its read of the name shows
  // no live reader for. True if it reset the count.
  bool forget_stale_reads(Connection& c, std::string_view name) const;
  // A waiting writer's intent: new reads of `name` wait while it is live.
  // Set for `client_key` unless another client's live intent is there.
  void set_intent(Connection& c, std::string_view name, std::uint64_t client_key, std::int64_t lease_us) const;
  void clear_intent(Connection& c, std::string_view name, std::uint64_t client_key) const;
  // set_intent for many names in one statement (the poller's refresh).
  void set_intents(Connection& c, const std::vector<std::string>& names, std::uint64_t client_key,
                   std::int64_t lease_us) const;

  // ---- the read side (a slot row and the head row together)
  // Takes reader slot `slot` (free or expired) for `holder` if no write is
  // live and no intent is live, or if the live write is `write_hold_id`
  // (the same owner's: a downgrade; 0 for none). Counts the read on the
  // head. False: refused, or the slot or head row does not exist.
  bool take_read(Connection& c, std::string_view name, ReaderSlot slot, const Holder& holder, unsigned state,
                 std::int64_t lease_us, bool watchdog, std::uint64_t write_hold_id,
                 const std::string* doorbell) const;
  // Reentrant read: count `state`, lease restarted, while `hold_id` is live.
  bool retake_read(Connection& c, std::string_view name, ReaderSlot slot, std::uint64_t hold_id, unsigned state,
                   std::int64_t lease_us, bool watchdog) const;
  // Down to `state`; 0 frees the slot and uncounts the read (giving back
  // `doorbell` when given). False: lost.
  bool release_read(Connection& c, std::string_view name, ReaderSlot slot, std::uint64_t hold_id, unsigned state,
                    const std::string* doorbell = nullptr) const;

  // ---- reads of the tables
  static constexpr std::size_t kFirstReaders = 3;
  // The head row of `name`, whether slot `slot` exists, and the first
  // live readers to expire.
  RwHead read_head(Connection& c, std::string_view name, ReaderSlot slot = {}) const;
  // The slot row (exists == false when there is none).
  ReaderRow read_slot(Connection& c, std::string_view name, ReaderSlot slot) const;
  // Live read holds of `name`, longest lease first.
  std::vector<ReaderRow> live_readers(Connection& c, std::string_view name) const;
  // Every head row with a live write or live reads, and every live read
  // hold (operator tools), ordered by name.
  std::vector<RwHead> read_held_heads(Connection& c) const;
  std::vector<ReaderRow> read_held_readers(Connection& c) const;
  std::vector<RwPoll> poll(Connection& c, const std::vector<std::string>& names) const;

  // ---- the watchdog and shutdown
  // Restarts the leases of these live watchdog-mode writes; returns how
  // many rows were renewed.
  std::size_t renew_writes(Connection& c, const std::vector<std::uint64_t>& hold_ids, std::int64_t lease_us) const;
  // The same for reads (raising read_expire with them). Returns the
  // server's affected-row count: the reader rows renewed plus the head
  // rows whose read_expire moved.
  std::size_t renew_reads(Connection& c, const std::vector<std::uint64_t>& hold_ids, std::int64_t lease_us) const;
  // The ids among `hold_ids` that are live writes.
  std::vector<std::uint64_t> live_writes_among(Connection& c, const std::vector<std::uint64_t>& hold_ids) const;
  // The ids among `hold_ids` that are live reads.
  std::vector<std::uint64_t> live_reads_among(Connection& c, const std::vector<std::uint64_t>& hold_ids) const;
  // Frees write hold / read hold `hold_id` whatever its lease (shutdown).
  void free_write_by_id(Connection& c, std::uint64_t hold_id) const;
  void free_read_by_id(Connection& c, std::uint64_t hold_id) const;
  // Deletes this client's free or expired slot rows (shutdown).
  void delete_slots(Connection& c, std::uint64_t client_key) const;

  // ---- operator tools
  // Clears a live write of `name`. True if one was cleared.
  bool force_write(Connection& c, std::string_view name) const;
  // Clears every read of `name` and its count; returns how many live read
  // holds were cleared.
  std::size_t force_reads(Connection& c, std::string_view name) const;

 private:
  void give_back(Connection& c, const std::string& doorbell) const;

  std::shared_ptr<spdlog::logger> logger_;
  std::string head_;
  std::string readers_;
  std::string qh_;  // quoted
  std::string qr_;
  std::string take_write_sql_;
  std::string take_write_bell_sql_;
  std::string take_read_sql_;
  std::string take_read_bell_sql_;
  std::string free_write_sql_;
  std::string free_write_bell_sql_;
  std::string hand_over_write_sql_;
  std::string free_read_sql_;
  std::string free_read_bell_sql_;
};

}  // namespace dlock::details
