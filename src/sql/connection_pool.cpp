#include "sql/connection_pool.hpp"

#include <algorithm>

namespace dlock::details {

PooledConnection::~PooledConnection() {
  if (pool_ != nullptr && connection_) pool_->give_back(std::move(connection_));
}

ConnectionPool::ConnectionPool(ConnectionSettings settings, std::size_t size)
    : settings_(std::move(settings)), size_(size) {}

ConnectionPool::~ConnectionPool() = default;

std::size_t ConnectionPool::in_use_count() const {
  std::lock_guard<std::mutex> guard(mutex_);
  return in_use_.size();
}

std::size_t ConnectionPool::open_count() const {
  std::lock_guard<std::mutex> guard(mutex_);
  return open_;
}

PooledConnection ConnectionPool::acquire(std::uint64_t preferred) {
  // Set by the first wait: a pool with an idle connection reads no clock.
  std::optional<std::chrono::steady_clock::time_point> deadline;
  for (;;) {
    std::unique_ptr<Connection> candidate;
    std::uint64_t epoch = 0;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      const auto ready = [&] { return !idle_.empty() || open_ < size_; };
      if (!ready()) {
        if (!deadline) deadline = std::min(std::chrono::steady_clock::now() + settings_.io_timeout, CallBudget::deadline());
        if (!returned_.wait_until(lock, *deadline, ready)) {
          throw BackendError("dlock: no pooled connection became free within io_timeout (" +
                                 std::to_string(settings_.io_timeout.count()) + " ms; pool_size " +
                                 std::to_string(size_) + ")",
                             0, "");
        }
      }
      if (idle_.empty()) {
        ++open_;  // reserve the slot before connecting outside the lock
      } else {
        auto it = idle_.end() - 1;  // LIFO: the warmest
        if (preferred != 0) {
          auto mine = std::find_if(idle_.begin(), idle_.end(),
                                   [&](const std::unique_ptr<Connection>& c) { return c->session_key() == preferred; });
          if (mine != idle_.end()) it = mine;
        }
        candidate = std::move(*it);
        idle_.erase(it);
        epoch = error_epoch_;
        // In use from here on, also while it is pinged below: a job for its
        // session (run_when_idle) waits for its return instead of being
        // dropped as if the session were gone.
        in_use_.push_back(candidate->session_key());
      }
    }
    if (!candidate) return open_new();
    const bool suspect = candidate->checked_epoch < epoch ||
                         std::chrono::steady_clock::now() - candidate->last_used() >= kPingAfterIdle;
    if (!suspect || candidate->ping()) {
      candidate->checked_epoch = epoch;
      return PooledConnection(this, std::move(candidate));
    }
    // Dead. The server (or the way to it) failed for every connection
    // idle as long: they are dropped unpinged, since each ping could take
    // the whole read timeout, and one fresh connection is opened instead.
    return replace_dead(std::move(candidate));
  }
}

PooledConnection ConnectionPool::replace_dead(std::unique_ptr<Connection> dead) {
  std::vector<std::unique_ptr<Connection>> closing;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    // The dead one, with any job waiting for its session (which is gone).
    forget_in_use(dead->session_key());
    on_return_.erase(dead->session_key());
    --open_;
    ++error_epoch_;
    for (auto& c : idle_) {
      on_return_.erase(c->session_key());
      closing.push_back(std::move(c));
    }
    open_ -= idle_.size();
    idle_.clear();
    ++open_;  // the fresh one's slot
  }
  dead.reset();
  closing.clear();  // outside the lock: closing a dead socket can block
  returned_.notify_all();
  return open_new();
}

PooledConnection ConnectionPool::acquire_fresh() {
  std::unique_ptr<Connection> closing;
  bool reserved = false;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    if (open_ >= size_ && !idle_.empty()) {
      closing = std::move(idle_.front());  // the coldest
      idle_.erase(idle_.begin());
      --open_;
    }
    if (open_ < size_) {
      ++open_;
      reserved = true;
    }
  }
  closing.reset();  // outside the lock: closing a dead socket can block
  // Every connection in use: take the next one returned (validated by the
  // epoch check, since the connection that died bumped the epoch).
  return reserved ? open_new() : acquire();
}

PooledConnection ConnectionPool::open_new() {
  std::unique_ptr<Connection> fresh;
  std::uint64_t epoch = 0;
  try {
    {
      std::lock_guard<std::mutex> guard(mutex_);
      epoch = error_epoch_;
    }
    fresh = Connection::open(settings_);
  } catch (...) {
    std::lock_guard<std::mutex> guard(mutex_);
    --open_;
    returned_.notify_all();
    throw;
  }
  fresh->checked_epoch = epoch;
  return hand_out(std::move(fresh));
}

std::unique_ptr<Connection> ConnectionPool::take_idle_session(std::uint64_t session_key) {
  auto it = std::find_if(idle_.begin(), idle_.end(),
                         [&](const std::unique_ptr<Connection>& c) { return c->session_key() == session_key; });
  if (it == idle_.end()) return nullptr;
  std::unique_ptr<Connection> found = std::move(*it);
  idle_.erase(it);
  // In use from the moment it leaves the idle list, under the same lock: a
  // run_when_idle() for it then queues its job instead of finding the
  // session neither idle nor in use and dropping the job.
  in_use_.push_back(session_key);
  return found;
}

std::optional<PooledConnection> ConnectionPool::try_acquire_session(std::uint64_t session_key) {
  std::unique_ptr<Connection> found;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    found = take_idle_session(session_key);
  }
  if (!found) return std::nullopt;
  // No ping: a dead session holds nothing any more, and the statement run on
  // it reports the loss like any other.
  return PooledConnection(this, std::move(found));
}

void ConnectionPool::run_when_idle(std::uint64_t session_key, std::function<void(Connection&)> job) {
  std::unique_ptr<Connection> found;
  {
    // One lock for the look and the take: in use, the job waits for the
    // return; idle, it is taken here; neither, the session is gone.
    std::lock_guard<std::mutex> guard(mutex_);
    if (std::find(in_use_.begin(), in_use_.end(), session_key) != in_use_.end()) {
      on_return_[session_key].push_back(std::move(job));
      return;
    }
    found = take_idle_session(session_key);
  }
  if (!found) return;
  PooledConnection c(this, std::move(found));
  job(*c);
}

PooledConnection ConnectionPool::hand_out(std::unique_ptr<Connection> connection) {
  std::lock_guard<std::mutex> guard(mutex_);
  in_use_.push_back(connection->session_key());
  return PooledConnection(this, std::move(connection));
}

void ConnectionPool::forget_in_use(std::uint64_t session_key) {
  if (auto it = std::find(in_use_.begin(), in_use_.end(), session_key); it != in_use_.end()) in_use_.erase(it);
}

void ConnectionPool::give_back(std::unique_ptr<Connection> connection) {
  connection->touch();
  std::unique_lock<std::mutex> lock(mutex_);
  // Jobs waiting for this very session run before anyone else can take it,
  // and a changed session is reset; both outside the lock, then look again.
  for (;;) {
    if (auto it = on_return_.find(connection->session_key()); it != on_return_.end()) {
      std::vector<std::function<void(Connection&)>> jobs = std::move(it->second);
      on_return_.erase(it);
      lock.unlock();
      for (auto& job : jobs)
        if (!connection->broken()) job(*connection);
      lock.lock();
      continue;
    }
    if (connection->broken() || !connection->session_dirty()) break;
    lock.unlock();
    try {
      connection->reset_session();
    } catch (const BackendError&) {
      // reset_session() marked it broken; it is dropped below.
    }
    lock.lock();
  }
  forget_in_use(connection->session_key());
  std::unique_ptr<Connection> dropped;
  if (connection->broken()) {
    --open_;
    ++error_epoch_;
    dropped = std::move(connection);
  } else {
    idle_.push_back(std::move(connection));
  }
  lock.unlock();
  returned_.notify_one();
  // `dropped` closes here, outside the lock: closing a dead socket can block.
}

}  // namespace dlock::details
