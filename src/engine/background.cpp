// The io thread's work: the watchdog renews every watchdog-mode hold of
// every kind, the poller asks each kind about the names local threads wait
// for and keeps this client's waiting marks alive.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>
#include <tuple>

#include "base/micros.hpp"
#include "base/printable.hpp"
#include "base/validation.hpp"
#include "engine/engine.hpp"

namespace dlock::details {

namespace {
using Clock = std::chrono::steady_clock;
using Micros = std::chrono::microseconds;
}  // namespace

bool Engine::renew_tick(const IoThread::ConnectionSource& connection) {
  std::vector<HoldRef> live = unexpired_watchdog_holds();
  if (live.empty()) return true;
  // Within one tick, not io_timeout: a row another transaction has locked
  // fails the renewal after one lock wait (a second on this connection),
  // and the others are renewed around it this same tick, well inside any
  // lease. A row that fails costs only its own hold.
  CallBudget budget(std::min(options_.io_timeout, renew_period()));
  std::vector<HeldRow> holds;
  holds.reserve(live.size());
  for (const auto& r : live) holds.push_back(HeldRow{RowKey{r.key.kind, r.key.name, r.slot}, r.hold_id});
  auto sent = Clock::now();
  const std::size_t renewed = run_renewal(connection, holds, sent);
  if (metrics_) metrics_->renewal_statement(Clock::now() - sent);
  if (renewed == live.size()) {
    holds_.extend(live, sent + options_.watchdog_timeout);
    count_renewals(live);
    return true;
  }
  return settle_partial_renewal(connection(), live, holds, renewed);
}

std::vector<HoldRef> Engine::unexpired_watchdog_holds() {
  auto refs = holds_.watchdog_holds();
  const auto now = Clock::now();
  std::vector<HoldRef> live;
  live.reserve(refs.size());
  for (auto& r : refs) {
    if (r.deadline <= now) {
      note_lost(r.key, r.owner, r.generation, "renewal failed past the lease");
    } else {
      live.push_back(std::move(r));
    }
  }
  return live;
}

std::size_t Engine::run_renewal(const IoThread::ConnectionSource& connection, const std::vector<HeldRow>& holds,
                                Clock::time_point& sent) {
  const std::int64_t lease_us = micros(options_.watchdog_timeout);
  const auto skipping_locked = [&](Connection& c) {
    sent = Clock::now();
    return rows_.renew_skipping_locked(c, holds, lease_us);
  };
  if (renew_around_locked_rows_) {
    // A row was locked by another transaction lately: around it at once,
    // rather than wait out the lock every tick.
    const std::size_t renewed = skipping_locked(connection());
    renew_around_locked_rows_ = renewed < holds.size();
    return renewed;
  }
  try {
    // A renewal only extends live holds of this client: running it again
    // on a fresh connection is safe whatever the first run did.
    return run_idempotent(connection, [&](Connection& c) {
      sent = Clock::now();
      return rows_.renew(c, holds, lease_us);
    });
  } catch (const BackendError& e) {
    if (e.code() != mysql_error::kLockWaitTimeout) throw;
    logger_->warn("dlock: renewal waited on a row locked by another transaction; renewing around it");
    renew_around_locked_rows_ = true;
    return skipping_locked(connection());
  }
}

bool Engine::settle_partial_renewal(Connection& connection, const std::vector<HoldRef>& live,
                                    const std::vector<HeldRow>& holds, std::size_t renewed) {
  // Fewer rows than holds: find out which holds are gone. A hold the read
  // still shows is live for what its row says is left (a row skipped
  // because it was locked was not renewed, but is not lost yet either).
  const auto read_sent = Clock::now();
  // By name and hold id: a hold id is random, but the holds a multi-lock
  // took together share one (a semaphore's slot is found by its hold id).
  std::map<std::tuple<Kind, std::string, std::uint64_t>, HoldRow> rows;
  for (auto& row : rows_.read_holds(connection, holds)) {
    auto key = std::make_tuple(row.key.kind, row.key.name, row.hold_id);
    rows.emplace(std::move(key), std::move(row));
  }
  std::vector<std::pair<std::int64_t, HoldRef>> shown_live;  // with the lease left: renewed, or skipped as locked
  for (const auto& r : live) {
    const auto it = rows.find(std::make_tuple(r.key.kind, r.key.name, r.hold_id));
    if (it != rows.end() && it->second.held_by(r.hold_id)) {
      const std::int64_t ttl_us = std::max<std::int64_t>(0, owner_ttl_us(it->second.ttl_us.value_or(0)));
      holds_.extend({r}, read_sent + Micros(ttl_us));
      shown_live.emplace_back(ttl_us, r);
    } else {
      note_lost(r.key, r.owner, r.generation, "the watchdog found it taken over, expired or force-unlocked");
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

void Engine::renew_or_retry(const IoThread::ConnectionSource& connection) {
  bool complete = false;
  try {
    complete = renew_tick(connection);
  } catch (...) {
    if (metrics_) metrics_->watchdog_tick_failed();
    // Again soon, not a renewal period later: a database back within the
    // lease must find its holds renewed before their deadlines.
    renew_again_soon();
    throw;  // the io thread logs it
  }
  if (!complete) renew_again_soon();
}

void Engine::renew_again_soon() {
  if (renew_retry_armed_ || holds_.watchdog_holds().empty()) return;
  renew_retry_armed_ = true;
  io_.after(std::min(kRenewRetry, renew_period()), "renewing leases again", [this](const IoThread::ConnectionSource& c) {
    renew_retry_armed_ = false;
    renew_or_retry(c);
  });
}

void Engine::count_renewals(const std::vector<HoldRef>& renewed) {
  if (!metrics_) return;
  std::array<std::uint64_t, kMetricKindCount> by_kind{};
  for (const auto& r : renewed) ++by_kind[index(metric_kind(r.key.kind))];
  for (std::size_t i = 0; i < by_kind.size(); ++i)
    if (by_kind[i] != 0) metrics_->renewed(static_cast<MetricKind>(i), by_kind[i]);
}

void Engine::poll_tick(const IoThread::ConnectionSource& connection) {
  const WakeSourceScope source(WakeSource::kPoll);
  for (const auto& k : kinds_)
    if (k) k->maintain(*this, connection);
  const auto waited = waiters_.names();
  std::array<std::vector<std::string>, 8> names;
  for (const auto& key : waited) names[static_cast<std::size_t>(key.kind)].push_back(key.name);
  CallBudget budget(options_.io_timeout);
  std::vector<NameKey> want_marks;
  for (const auto& k : kinds_) {
    if (!k) continue;
    const auto& batch = names[static_cast<std::size_t>(k->traits.kind)];
    if (batch.empty()) continue;
    // A read: safe to repeat.
    const std::vector<std::string> held =
        run_idempotent(connection, [&](Connection& c) { return k->poll(*this, c, batch); });
    using Intent = HoldKind::Traits::Intent;
    if (k->traits.intents == Intent::kWhenRefused) {
      // The write side's waiters keep their marks while they wait (and take
      // one another client's writer held, once it is free).
      for (const auto& name : batch) want_marks.emplace_back(k->traits.kind, name);
    } else if (k->traits.intents == Intent::kWhenNotRung) {
      // Marks kept, and new ones where no bell will ring for the waiter
      // and it lost a race for the name since the last poll.
      for (const auto& name : batch) {
        const NameKey key(k->traits.kind, name);
        const bool lost_race = std::find(held.begin(), held.end(), name) != held.end();
        // Only for a waiter that will take it: a watcher alone (a set's, an
        // observer's) must not keep the name from anyone.
        if (has_intent(key) || (lost_race && !(bells_ && bells_->watching(key)) && waiters_.has_subscriber(key) &&
             !watched_only(key)))
          want_marks.push_back(key);
      }
    }
  }
  if (want_marks.empty()) return;
  // Keep this client's marks alive, and take marks whose clients stopped
  // renewing them: one statement per kind, decided and run under
  // intent_statements_mutex_, so no unmark falls between. Within a second:
  // a row another transaction has locked must not hold up the watchdog.
  std::lock_guard<std::mutex> marking(intent_statements_mutex_);
  CallBudget marks_budget(std::chrono::seconds(1));
  std::map<Kind, std::vector<std::string>> by_kind;
  for (const auto& key : want_marks)
    if (waiters_.has(key)) by_kind[key.kind].push_back(key.name);
  for (const auto& [kind, batch] : by_kind) {
    HoldKind& k = this->kind(kind);
    // A mark only renews or takes marks for this client's waiters.
    const std::vector<std::string> held =
        run_idempotent(connection, [&](Connection& c) { return k.mark(*this, c, batch, micros(intent_lease())); });
    for (const auto& name : held) {
      const NameKey key(kind, name);
      if (!waiters_.has(key)) {
        // The waiter left (or took it) since the look: no mark for nobody.
        k.unmark(*this, connection(), name);
        continue;
      }
      std::lock_guard<std::mutex> guard(intents_mutex_);
      intents_.emplace(key, true);
      intent_count_.store(intents_.size(), std::memory_order_relaxed);
    }
  }
}

// ---------------------------------------------------------------- introspection

bool Engine::is_locked(NameKeyView key) {
  validate_name(key.name);
  CallBudget budget(options_.io_timeout);
  return kind(key.kind).is_locked(*this, key.name);
}

std::optional<Millis> Engine::remaining_ttl(NameKeyView key) {
  validate_name(key.name);
  CallBudget budget(options_.io_timeout);
  const auto ttl = kind(key.kind).ttl_us(*this, key.name);
  if (!ttl) return std::nullopt;
  return Millis(std::max<std::int64_t>(0, owner_ttl_us(*ttl) / 1000));
}

std::optional<Hold> Engine::local_hold(NameKeyView key, std::uint64_t owner) const {
  auto hold = holds_.find(key, owner);
  if (!hold || hold->lost || Clock::now() >= hold->deadline) return std::nullopt;
  return hold;
}

std::optional<Hold> Engine::confirmed_hold(NameKeyView key, std::uint64_t owner) {
  validate_name(key.name);
  // The local lease deadline is measured from when the acquiring statement
  // was sent, so once it passes the hold may already belong to someone else.
  auto hold = local_hold(key, owner);
  if (!hold) return std::nullopt;
  CallBudget budget(options_.io_timeout);
  const HoldRow seen = read([&](Connection& c) {
    if (hold->slot != kAnySlot) return rows_.read(c, RowKey{key.kind, std::string(key.name), hold->slot});
    return rows_.find(c, key.kind, key.name, hold->hold_id).value_or(HoldRow{});
  });
  if (!seen.held_by(hold->hold_id)) {
    note_lost(key, owner, hold->generation, "the row shows another owner or none",
              seen.live && seen.hold_id != 0 && seen.state > 0);
    return std::nullopt;
  }
  if (hold->fence == 0 || hold->slot == kAnySlot) {
    // Learned once: a hold's fence and slot never change while it is held.
    // A hold counted lost while the read ran gets no token: its loss was
    // told without one.
    if (!holds_.learn(key, owner, hold->generation, seen.fence, seen.key.slot)) return std::nullopt;
    hold->fence = seen.fence;
    hold->slot = seen.key.slot;
  }
  return hold;
}

std::uint64_t Engine::fencing_token(NameKeyView key, std::uint64_t owner) {
  validate_name(key.name);
  const auto hold = local_hold(key, owner);
  if (!hold) return 0;
  if (hold->fence != 0) return hold->fence;
  const auto confirmed = confirmed_hold(key, owner);
  return confirmed ? confirmed->fence : 0;
}

}  // namespace dlock::details
