// The poller (the io thread's other work, beside the watchdog in
// watchdog.cpp) asks each kind about the names local threads wait for and
// keeps this client's intents alive; and the introspection reads.
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

void Engine::poll_tick(const IoThread::ConnectionSource& connection) {
  const WakeSourceScope source(WakeSource::kPoll);
  for (const auto& k : kinds_)
    if (k) k->maintain(*this, connection);
  const auto waited = waiters_.names();
  std::array<std::vector<std::string>, 8> names;
  for (const auto& key : waited) names[static_cast<std::size_t>(key.kind)].push_back(key.name);
  CallBudget budget(options_.io_timeout);
  std::vector<NameKey> want_intents;
  for (const auto& k : kinds_) {
    if (!k) continue;
    const auto& batch = names[static_cast<std::size_t>(k->traits.kind)];
    if (batch.empty()) continue;
    // A read: safe to repeat.
    const std::vector<std::string> held =
        run_idempotent(connection, [&](Connection& c) { return k->poll(*this, c, batch); });
    using Intent = HoldKind::Traits::Intent;
    if (k->traits.intents == Intent::kWhenRefused) {
      // The write side's waiters keep their intents while they wait (and take
      // one another client's writer held, once it is free).
      for (const auto& name : batch) want_intents.emplace_back(k->traits.kind, name);
    } else if (k->traits.intents == Intent::kWhenNotRung) {
      // Marks kept, and new ones where no bell will ring for the waiter
      // and it lost a race for the name since the last poll.
      for (const auto& name : batch) {
        const NameKey key(k->traits.kind, name);
        const bool lost_race = std::find(held.begin(), held.end(), name) != held.end();
        // Only for a waiter that will take it: a watcher (a set's, an
        // observer's) must not keep the name from anyone.
        if (has_intent(key) || (lost_race && !(bells_ && bells_->watching(key)) && waiters_.has_subscriber(key)))
          want_intents.push_back(key);
      }
    }
  }
  if (want_intents.empty()) return;
  // Keep this client's intents alive, and take intents whose clients stopped
  // renewing them: one statement per kind, decided and run under
  // intent_statements_mutex_, so no clear falls between. Within a second:
  // a row another transaction has locked must not hold up the watchdog.
  std::lock_guard<std::mutex> intending(intent_statements_mutex_);
  CallBudget intents_budget(std::chrono::seconds(1));
  std::map<Kind, std::vector<std::string>> by_kind;
  for (const auto& key : want_intents)
    if (waiters_.has(key)) by_kind[key.kind].push_back(key.name);
  for (const auto& [kind, batch] : by_kind) {
    HoldKind& k = this->kind(kind);
    // Only renews or takes intents for this client's waiters.
    const std::vector<std::string> held =
        run_idempotent(connection, [&](Connection& c) { return k.set_intents(*this, c, batch, micros(intent_lease())); });
    for (const auto& name : held) {
      const NameKey key(kind, name);
      if (!waiters_.has(key)) {
        // The waiter left (or took it) since the look: no intent for nobody.
        k.clear_intent(*this, connection(), name);
        continue;
      }
      record_intent(key);
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
