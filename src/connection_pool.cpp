#include "connection_pool.hpp"

namespace dlock::details {

PooledConnection::~PooledConnection() {
  if (pool_ != nullptr && connection_) pool_->give_back(std::move(connection_));
}

ConnectionPool::ConnectionPool(ConnectionSettings settings, std::size_t size)
    : settings_(std::move(settings)), size_(size) {}

ConnectionPool::~ConnectionPool() = default;

std::size_t ConnectionPool::open_count() const {
  std::lock_guard<std::mutex> guard(mutex_);
  return open_;
}

PooledConnection ConnectionPool::acquire() {
  const auto deadline = std::chrono::steady_clock::now() + settings_.io_timeout;
  for (;;) {
    std::unique_ptr<Connection> candidate;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      if (!returned_.wait_until(lock, deadline, [&] { return !idle_.empty() || open_ < size_; })) {
        throw BackendError("dlock: no pooled connection became free within io_timeout (" +
                               std::to_string(settings_.io_timeout.count()) + " ms; pool_size " +
                               std::to_string(size_) + ")",
                           0, "");
      }
      if (!idle_.empty()) {
        candidate = std::move(idle_.back());
        idle_.pop_back();
      } else {
        ++open_;  // reserve the slot before connecting outside the lock
      }
    }
    if (!candidate) {
      try {
        return PooledConnection(this, Connection::open(settings_));
      } catch (...) {
        std::lock_guard<std::mutex> guard(mutex_);
        --open_;
        returned_.notify_one();
        throw;
      }
    }
    if (std::chrono::steady_clock::now() - candidate->last_used() < kPingAfterIdle || candidate->ping()) {
      return PooledConnection(this, std::move(candidate));
    }
    // Died while idle: drop it and try again (a fresh slot is now free).
    std::lock_guard<std::mutex> guard(mutex_);
    --open_;
  }
}

void ConnectionPool::give_back(std::unique_ptr<Connection> connection) {
  if (!connection->broken() && connection->session_dirty()) {
    try {
      connection->reset_session();
    } catch (const BackendError&) {
      // reset_session() marked it broken; it is dropped below.
    }
  }
  connection->touch();
  std::unique_ptr<Connection> dropped;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    if (connection->broken()) {
      --open_;
      dropped = std::move(connection);
    } else {
      idle_.push_back(std::move(connection));
    }
  }
  returned_.notify_one();
  // `dropped` closes here, outside the lock: closing a dead socket can block.
}

}  // namespace dlock::details
