// Engine::guard_sql: the guard statement of an owner's live holds
// (sql/guard_statement.hpp, docs/guarded-transactions.md).
#include "base/printable.hpp"
#include "base/validation.hpp"
#include "engine/engine.hpp"
#include "sql/guard_statement.hpp"

namespace dlock::details {

std::string Engine::guard_sql(const std::vector<NameKey>& keys, std::uint64_t owner) {
  std::vector<GuardedHold> guarded;
  guarded.reserve(keys.size());
  for (const auto& key : keys) {
    validate_name(key.name);
    std::optional<Hold> hold = holds_.find(key, owner);
    if (!hold) {
      throw NotHeldError(std::string("dlock: guard_sql of ") + kind_name(key.kind) + " \"" + printable(key.name) +
                         "\" by an owner (" + std::to_string(owner) + ") that holds no hold on it in this client");
    }
    // Lost, or past its deadline (the clock is telling it right now).
    if (hold->lost || std::chrono::steady_clock::now() >= hold->deadline) throw_lost(key, hold->fence);
    if (hold->slot == kAnySlot) {
      // A permit's slot: learned by one read, then kept.
      const std::uint64_t fence = hold->fence;
      hold = confirmed_hold(key, owner);
      if (!hold) throw_lost(key, fence);
    }
    guarded.push_back(GuardedHold{key.kind, key.name, hold->slot, hold->hold_id});
  }
  return guard_statement(options_.database, options_.table, guarded);
}

}  // namespace dlock::details
