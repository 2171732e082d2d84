// The watchdog (on the io thread): every renewal period it renews every
// watchdog-mode hold of every kind in one statement, around rows another
// transaction has locked, and again soon when a round fails or skips a
// hold; a hold it finds gone is reported lost (Engine::note_lost).
#include "engine/watchdog.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>
#include <tuple>

#include "base/micros.hpp"
#include "engine/engine.hpp"

namespace dlock::details {

namespace {
using Clock = std::chrono::steady_clock;
using Micros = std::chrono::microseconds;
}  // namespace

bool Watchdog::tick(const IoThread::ConnectionSource& connection) {
  std::vector<HoldRef> live = unexpired_watchdog_holds();
  if (live.empty()) return true;
  // Within one tick, not io_timeout: a row another transaction has locked
  // fails the renewal after one lock wait (a second on this connection),
  // and the others are renewed around it this same tick, well inside any
  // lease. A row that fails costs only its own hold.
  CallBudget budget(std::min(e_.options_.io_timeout, e_.renew_period()));
  std::vector<HeldRow> holds;
  holds.reserve(live.size());
  for (const auto& r : live) holds.push_back(HeldRow{RowKey{r.key.kind, r.key.name, r.slot}, r.hold_id});
  auto sent = Clock::now();
  const std::size_t renewed = run_renewal(connection, holds, sent);
  if (e_.metrics_) e_.metrics_->renewal_statement(Clock::now() - sent);
  if (renewed == live.size()) {
    e_.holds_.extend(live, sent + e_.options_.watchdog_timeout);
    count_renewals(live);
    return true;
  }
  return settle_partial_renewal(connection(), live, holds, renewed);
}

std::vector<HoldRef> Watchdog::unexpired_watchdog_holds() {
  auto refs = e_.holds_.watchdog_holds();
  const auto now = Clock::now();
  std::vector<HoldRef> live;
  live.reserve(refs.size());
  for (auto& r : refs) {
    if (r.deadline <= now) {
      e_.note_lost(r.key, r.owner, r.generation, "renewal failed past the lease");
    } else {
      live.push_back(std::move(r));
    }
  }
  return live;
}

std::size_t Watchdog::run_renewal(const IoThread::ConnectionSource& connection, const std::vector<HeldRow>& holds,
                                Clock::time_point& sent) {
  const std::int64_t lease_us = micros(e_.options_.watchdog_timeout);
  const auto skipping_locked = [&](Connection& c) {
    sent = Clock::now();
    return e_.rows_.renew_skipping_locked(c, holds, lease_us);
  };
  if (around_locked_rows_) {
    // A row was locked by another transaction lately: around it at once,
    // rather than wait out the lock every tick.
    const std::size_t renewed = skipping_locked(connection());
    around_locked_rows_ = renewed < holds.size();
    return renewed;
  }
  try {
    // A renewal only extends live holds of this client: running it again
    // on a fresh connection is safe whatever the first run did.
    return e_.run_idempotent(connection, [&](Connection& c) {
      sent = Clock::now();
      return e_.rows_.renew(c, holds, lease_us);
    });
  } catch (const BackendError& e) {
    if (e.code() != mysql_error::kLockWaitTimeout) throw;
    e_.logger_->warn("dlock: renewal waited on a row locked by another transaction; renewing around it");
    around_locked_rows_ = true;
    return skipping_locked(connection());
  }
}

bool Watchdog::settle_partial_renewal(Connection& connection, const std::vector<HoldRef>& live,
                                    const std::vector<HeldRow>& holds, std::size_t renewed) {
  // Fewer rows than holds: find out which holds are gone. A hold the read
  // still shows is live for what its row says is left (a row skipped
  // because it was locked was not renewed, but is not lost yet either).
  const auto read_sent = Clock::now();
  // By name and hold id: a hold id is random, but the holds a multi-lock
  // took together share one (a semaphore's slot is found by its hold id).
  std::map<std::tuple<Kind, std::string, std::uint64_t>, HoldRow> rows;
  for (auto& row : e_.rows_.read_holds(connection, holds)) {
    auto key = std::make_tuple(row.key.kind, row.key.name, row.hold_id);
    rows.emplace(std::move(key), std::move(row));
  }
  std::vector<std::pair<std::int64_t, HoldRef>> shown_live;  // with the lease left: renewed, or skipped as locked
  for (const auto& r : live) {
    const auto it = rows.find(std::make_tuple(r.key.kind, r.key.name, r.hold_id));
    if (it != rows.end() && it->second.held_by(r.hold_id)) {
      const std::int64_t ttl_us = std::max<std::int64_t>(0, owner_ttl_us(it->second.ttl_us.value_or(0)));
      e_.holds_.extend({r}, read_sent + Micros(ttl_us));
      shown_live.emplace_back(ttl_us, r);
    } else {
      e_.note_lost(r.key, r.owner, r.generation, "the watchdog found it taken over, expired or force-unlocked");
    }
  }
  // The `renewed` rows the statement changed are the ones with the most
  // lease left: a whole lease from just now, where a row skipped as locked
  // has what its last renewal, a tick or more ago, gave it.
  const std::size_t counted = std::min(renewed, shown_live.size());
  std::partial_sort(shown_live.begin(), shown_live.begin() + static_cast<std::ptrdiff_t>(counted), shown_live.end(),
                    [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<HoldRef> renewed_ones;
  renewed_ones.reserve(counted);
  for (std::size_t i = 0; i < counted; ++i) renewed_ones.push_back(std::move(shown_live[i].second));
  count_renewals(renewed_ones);
  // Holds skipped because another transaction (a guarded one, say) has
  // their row locked: tried again soon, so a lock that ends before their
  // deadline costs them nothing.
  return renewed >= shown_live.size();
}

void Watchdog::tick_or_retry(const IoThread::ConnectionSource& connection) {
  bool complete = false;
  try {
    complete = tick(connection);
  } catch (...) {
    if (e_.metrics_) e_.metrics_->watchdog_tick_failed();
    // Again soon, not a renewal period later: a database back within the
    // lease must find its holds renewed before their deadlines.
    again_soon();
    throw;  // the io thread logs it
  }
  if (!complete) again_soon();
}

void Watchdog::again_soon() {
  if (retry_armed_ || e_.holds_.watchdog_holds().empty()) return;
  retry_armed_ = true;
  e_.io_.after(std::min(Engine::kRenewRetry, e_.renew_period()), "renewing leases again",
               [this](const IoThread::ConnectionSource& c) {
                 retry_armed_ = false;
                 tick_or_retry(c);
               });
}

void Watchdog::count_renewals(const std::vector<HoldRef>& renewed) {
  if (!e_.metrics_) return;
  std::array<std::uint64_t, kMetricKindCount> by_kind{};
  for (const auto& r : renewed) ++by_kind[index(metric_kind(r.key.kind))];
  for (std::size_t i = 0; i < by_kind.size(); ++i)
    if (by_kind[i] != 0) e_.metrics_->renewed(static_cast<MetricKind>(i), by_kind[i]);
}

}  // namespace dlock::details
