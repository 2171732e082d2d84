// What every table's statements share: binding parameters left to right,
// running one statement with the retry rule for deadlocks and lock-wait
// timeouts, and the fixed-size IN lists. HoldRows and the kinds keep each
// statement's text next to its bindings and run it through these.
#pragma once

#include <cppconn/exception.h>
#include <cppconn/prepared_statement.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "sql/connection.hpp"

namespace dlock::details {

// Binds parameters left to right.
class Binder {
 public:
  explicit Binder(sql::PreparedStatement& ps) : ps_(ps) {}
  Binder& text(std::string_view v) {
    ps_.setString(next_++, sql::SQLString(v.data(), v.size()));
    return *this;
  }
  Binder& u64(std::uint64_t v) {
    ps_.setUInt64(next_++, v);
    return *this;
  }
  Binder& i64(std::int64_t v) {
    ps_.setInt64(next_++, v);
    return *this;
  }
  Binder& flag(bool v) {
    ps_.setInt(next_++, v ? 1 : 0);
    return *this;
  }

 private:
  sql::PreparedStatement& ps_;
  unsigned next_ = 1;
};

inline std::int64_t execute_update(sql::PreparedStatement& ps) { return ps.executeUpdate(); }

// Runs `body` (one statement) on `c`. Deadlocks and lock-wait timeouts were
// rolled back by the server, so the statement may simply run again after a
// short randomised pause, up to 7 times (on Galera, where 1213 is also a
// certification conflict, as often as the budget allows: see
// ServerProfile::deadlock_retry_limit), as long as the call's CallBudget
// leaves room for another full lock wait: a row locked by a foreign
// transaction then fails the call within about io_timeout instead of once
// per retry. `undo` runs
// (best effort) after any failure that left the session alive, before a
// retry or the throw. A lost connection marks `c` broken and throws
// OutcomeUnknown: the caller decides how to reconcile. `logger` may be null.
template <class Body, class Undo>
auto run_statement(Connection& c, const std::shared_ptr<spdlog::logger>& logger, const char* what, Body&& body,
                   Undo&& undo) {
  constexpr int kMaxAttempts = 8;
  thread_local std::minstd_rand jitter(std::random_device{}());
  MetricCounters* const counters = c.counters();
  for (int attempt = 1;; ++attempt) {
    try {
      auto result = body();
      c.touch();
      return result;
    } catch (const sql::SQLException& e) {
      const int code = e.getErrorCode();
      // Code 0 is Connector/C++'s own failure (closed connection or
      // statement): as unknown as a lost connection.
      if (code == 0 || is_connection_error(code)) {
        c.mark_broken();
        throw OutcomeUnknown(to_backend_error(e, what), SessionAddress{c.server_id(), c.server_index()});
      }
      undo();
      const auto pause = std::chrono::microseconds(200 * std::min(attempt, kMaxAttempts) + jitter() % 1000);
      // The profile's longer run of retries only within a budget that ends it.
      const bool budgeted = CallBudget::deadline() != CallBudget::Clock::time_point::max();
      const int limit =
          code == mysql_error::kDeadlock && budgeted ? c.profile().deadlock_retry_limit() : kMaxAttempts;
      if (is_retryable(code) && attempt < limit &&
          CallBudget::allows(pause + std::chrono::seconds(c.lock_wait_seconds()))) {
        if (logger) {
          logger->log(attempt < kMaxAttempts ? spdlog::level::warn : spdlog::level::debug,
                      "dlock: {}: MySQL error {} ({}); retry {}", what, code, e.what(), attempt);
        }
        if (counters != nullptr) counters->retry(code);
        std::this_thread::sleep_for(pause);
        continue;
      }
      throw to_backend_error(e, what);
    }
  }
}

template <class Body>
auto run_statement(Connection& c, const std::shared_ptr<spdlog::logger>& logger, const char* what, Body&& body) {
  return run_statement(c, logger, what, std::forward<Body>(body), [] {});
}

// IN lists hold at most kInListChunk values per statement.
inline constexpr std::size_t kInListChunk = 512;

// "?,?,...,?" with `n` placeholders.
inline std::string placeholders(std::size_t n) {
  std::string s;
  s.reserve(n * 2);
  for (std::size_t i = 0; i < n; ++i) s += i == 0 ? "?" : ",?";
  return s;
}

// IN lists are prepared in a few fixed sizes and padded by repeating the last
// value, so a connection caches at most four variants of each statement.
inline std::size_t in_list_bucket(std::size_t n) {
  for (std::size_t b : {std::size_t{1}, std::size_t{8}, std::size_t{64}, kInListChunk})
    if (n <= b) return b;
  return kInListChunk;
}

// Calls `each(first, count, bucket)` for every chunk of `values`.
template <class Value, class Each>
void for_each_chunk(const std::vector<Value>& values, Each&& each) {
  for (std::size_t first = 0; first < values.size(); first += kInListChunk) {
    const std::size_t count = std::min(kInListChunk, values.size() - first);
    each(first, count, in_list_bucket(count));
  }
}

// Binds values[first, first + count) padded to `bucket` by repeating the last.
inline void bind_texts(Binder& b, const std::vector<std::string>& values, std::size_t first, std::size_t count,
                       std::size_t bucket) {
  for (std::size_t i = 0; i < bucket; ++i) b.text(values[first + std::min(i, count - 1)]);
}

}  // namespace dlock::details
