// details::Client implements DatabaseDistributedLock.
//
// Acquire: one statement when free (the upsert in LockTable::acquire) or
// reentrant (LockTable::reacquire). A waiting acquire subscribes to the
// name's local semaphore first, then loops: attempt; on refusal read the
// holder's TTL; sleep until woken or the TTL or the caller's deadline ends.
//
// Unknown outcomes: when a write's connection dies mid-statement, the row is
// read on another connection. If it shows the write applied, that is the
// result; if it shows it did not, the statement is run once more. That is
// safe because every write names absolute values (state = N) and the acquire
// takes over its own owner's ghost rows, so even a first run that lands
// late cannot make the count drift.
//
// Background (io thread): the watchdog renews every live watchdog-mode hold
// in one statement per tick (per 512 names) and, when fewer rows than holds
// were renewed, reads them back to find which were lost; the poller checks
// every waited-for name in one statement per tick and wakes one waiter per
// free name.
//
// Fast wake-up (doorbell.hpp): fresh acquires take the name's doorbell in
// the same statement and remember which pooled session did; the full release
// runs on that session and gives it back in the same statement. Waiters arm
// the DoorbellWatcher after each refused attempt.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "connection_pool.hpp"
#include "doorbell.hpp"
#include "dlock/options.hpp"
#include "hold_registry.hpp"
#include "io_thread.hpp"
#include "known_rows.hpp"
#include "lock_table.hpp"
#include "waiter_registry.hpp"

namespace dlock::details {

class Client {
 public:
  explicit Client(Options options);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // lease: nullopt = watchdog mode. wait: nullopt = forever; <= 0 = one attempt.
  bool acquire(std::string_view name, std::optional<Millis> lease, std::optional<Millis> wait);
  void release(std::string_view name);
  bool force_release(std::string_view name);

  bool is_locked(std::string_view name);
  bool is_held_by_current_thread(std::string_view name);
  int hold_count(std::string_view name);
  std::optional<Millis> remaining_ttl(std::string_view name);
  std::uint64_t fencing_token(std::string_view name);

  const std::string& machine_id() const noexcept { return machine_id_; }
  const Options& options() const noexcept { return options_; }
  ConnectionPool& pool() { return pool_; }
  const LockTable& table() const { return table_; }

 private:
  struct Attempt {
    bool acquired = false;
    std::optional<std::int64_t> ttl_us;  // holder's lease left, when asked for
    bool holder_is_local = false;        // the holder is a thread of this client
  };

  Attempt attempt(std::string_view name, const Owner& owner, Millis lease, bool watchdog, bool want_ttl);
  // Takes the row from free, expired or this owner's ghost, with count
  // `state`: a conditional UPDATE when the row is known to exist, else the
  // upsert. Reconciles a lost connection. `row` gets the row read after a
  // refusal (exists == false if no read was needed), `fence` the token when
  // the statement reveals it (0 otherwise).
  // `doorbell_session` gets the server id of the session that took the
  // doorbell with the row (0 if none was tried or the session died).
  AcquireResult acquire_fresh(std::string_view name, const Owner& owner, unsigned state, std::int64_t lease_us,
                              bool watchdog, LockRow& row, std::uint64_t& fence, std::uint64_t& doorbell_session);
  // Gives back the doorbell `session` may hold for `name` as soon as that
  // session is idle: now, or when the thread using it returns it. Never
  // waits; best effort.
  void drop_doorbell(std::string_view name, std::uint64_t session);
  std::string doorbell(std::string_view name) const;
  bool reacquire_reconciled(std::string_view name, const Owner& owner, unsigned state, std::int64_t lease_us,
                            bool watchdog);
  // The caller's hold as the database sees it now, or nullopt if it holds
  // none (detects and reports a loss). No SQL when there is no local hold.
  std::optional<Hold> confirmed_hold(std::string_view name, std::uint64_t thread, LockRow* row_out);
  void note_lost(std::string_view name, std::uint64_t thread, std::uint64_t generation, const char* why);
  void report_lost(std::string_view name, std::uint64_t fence, const char* why);
  // Reads the row after an OutcomeUnknown; throws BackendError if even that fails.
  LockRow read_after_unknown(std::string_view name, const OutcomeUnknown& cause);
  template <class Fn>
  auto with_connection(Fn&& fn);
  // One read of the row. Reads change nothing, so a read whose connection
  // died is simply run again once on a fresh connection.
  LockRow read_row(std::string_view name);

  void renew_tick(const IoThread::ConnectionSource& connection);
  void poll_tick(const IoThread::ConnectionSource& connection);

  const Options options_;
  const std::shared_ptr<spdlog::logger> logger_;
  const std::string machine_id_;
  const LockTable table_;
  ConnectionPool pool_;
  HoldRegistry holds_;
  WaiterRegistry waiters_;
  KnownRows known_rows_;
  IoThread io_;  // destroyed (stopped) after the watcher, before the rest
  // Null when fast_wakeup is off. Reset first in the destructor: it sends
  // its KILL QUERYs through io_.
  std::unique_ptr<DoorbellWatcher> doorbells_;
};

}  // namespace dlock::details
