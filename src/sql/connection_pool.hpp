// A bounded pool of connections for callers' operations.
//
// At most `size` connections exist at once; they are opened lazily and kept
// idle in LIFO order (the most recently used is warmest). `acquire()` hands
// out a move-only PooledConnection that returns itself when destroyed: a
// broken connection is discarded (its slot is freed for a fresh one), a
// connection whose session was changed is reset first, and a connection that
// sat idle for a while is pinged before reuse, since the server may have
// closed it (wait_timeout).
//
// A broken connection coming back is also news about the others: the server
// may have restarted or killed this client's sessions. It starts a new
// "error epoch", and every connection not checked since is pinged before it
// is handed out again, so a call made once the server answers again gets a
// live connection instead of failing on a dead idle one. A ping that fails
// is news about all of them: every idle connection is then dropped unpinged
// and one fresh connection opened, so a call pings at most once (a ping in a
// partition takes the whole read timeout) and stays within connect_timeout +
// io_timeout however many connections died.
//
// Thread safety: acquire() may be called from any thread. A PooledConnection
// is used by one thread at a time.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <unordered_map>
#include <mutex>
#include <vector>

#include "sql/connection.hpp"

namespace dlock::details {

class ConnectionPool;

class PooledConnection {
 public:
  PooledConnection(PooledConnection&& other) noexcept : pool_(other.pool_), connection_(std::move(other.connection_)) {
    other.pool_ = nullptr;
  }
  PooledConnection& operator=(PooledConnection&&) = delete;
  PooledConnection(const PooledConnection&) = delete;
  PooledConnection& operator=(const PooledConnection&) = delete;
  ~PooledConnection();

  Connection* operator->() const { return connection_.get(); }
  Connection& operator*() const { return *connection_; }

 private:
  friend class ConnectionPool;
  PooledConnection(ConnectionPool* pool, std::unique_ptr<Connection> connection)
      : pool_(pool), connection_(std::move(connection)) {}

  ConnectionPool* pool_;
  std::unique_ptr<Connection> connection_;
};

class ConnectionPool {
 public:
  ConnectionPool(ConnectionSettings settings, std::size_t size);
  ~ConnectionPool();
  ConnectionPool(const ConnectionPool&) = delete;
  ConnectionPool& operator=(const ConnectionPool&) = delete;

  // A connection, waiting up to io_timeout for one to be returned when all
  // `size` are in use. Throws BackendError when none frees up in time or a
  // new one cannot be opened.
  // `preferred`: the session key (Connection::session_key) of a connection to hand out if it is idle
  // (callers pass the one their thread used last, so a thread tends to keep
  // its connection, and with it any session-bound state it left there).
  // Waits no longer than the calling thread's CallBudget either.
  PooledConnection acquire(std::uint64_t preferred = 0);
  // A newly opened connection (closing an idle one if the pool is full),
  // for reading back the outcome of a statement whose connection died:
  // that read must not run on another connection the same fault killed.
  PooledConnection acquire_fresh();

  // Session-bound state (a hold's bell, see session_bell.hpp) can only be
  // given back by the session that took it. These two never wait:
  //
  // The connection with session key `session_key` if it is idle now; nullopt if
  // another thread uses it or it no longer exists.
  std::optional<PooledConnection> try_acquire_session(std::uint64_t session_key);
  // Runs `job` on that connection as soon as it is idle: at once on this
  // thread if it is idle now, else on the thread that returns it, before
  // anyone else can take it. Nothing if the connection no longer exists (its
  // session, and whatever it held, is gone). `job` must not throw.
  void run_when_idle(std::uint64_t session_key, std::function<void(Connection&)> job);

  // Connections that exist now (idle + in use), for tests and diagnostics.
  std::size_t open_count() const;
  std::size_t capacity() const { return size_; }
  // Connections handed out now.
  std::size_t in_use_count() const;
  // Idle connections older than this are pinged before reuse.
  static constexpr std::chrono::seconds kPingAfterIdle{5};

 private:
  friend class PooledConnection;
  void give_back(std::unique_ptr<Connection> connection);
  PooledConnection hand_out(std::unique_ptr<Connection> connection);
  void forget_in_use(std::uint64_t session_key);  // under mutex_
  // Under mutex_: the idle connection of `session_key`, now in use; null if
  // it is not idle.
  std::unique_ptr<Connection> take_idle_session(std::uint64_t session_key);
  PooledConnection open_new();
  // After `dead` (in use, just found dead by its ping): drops it and every
  // idle connection, and opens one fresh connection in a slot of theirs.
  PooledConnection replace_dead(std::unique_ptr<Connection> dead);

  const ConnectionSettings settings_;
  const std::size_t size_;
  mutable std::mutex mutex_;
  std::condition_variable returned_;
  std::vector<std::unique_ptr<Connection>> idle_;
  std::vector<std::uint64_t> in_use_;  // session keys of the connections handed out
  std::unordered_map<std::uint64_t, std::vector<std::function<void(Connection&)>>> on_return_;
  std::size_t open_ = 0;
  std::uint64_t error_epoch_ = 0;  // bumped by every broken connection returned
};

}  // namespace dlock::details
