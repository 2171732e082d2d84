// What a kind does where it has nothing of its own to say.
#include "engine/hold_kind.hpp"

#include <stdexcept>

#include "engine/engine.hpp"

namespace dlock::details {

bool HoldKind::retake(KindContext& e, Connection& c, const RowKey& row, std::uint64_t hold_id, unsigned count,
                      std::int64_t lease_us, bool watchdog) {
  return e.rows().retake(c, row, hold_id, count, lease_us, watchdog);
}

bool HoldKind::free(KindContext& e, Connection& c, const RowKey& row, std::uint64_t hold_id, std::int64_t at_least_us,
                    HoldRows::Marks marks, bool ring) {
  return e.rows().free(c, row, hold_id, at_least_us, marks, ring);
}

bool HoldKind::hand_over(KindContext&, Connection&, const RowKey&, std::uint64_t, std::uint64_t, const AcquireRequest&) {
  throw std::logic_error("dlock: this kind of hold is not handed over");
}

bool HoldKind::fits(const Hold&, const AcquireRequest&) const { return true; }

void HoldKind::wake(WaiterRegistry& waiters, std::string_view name) { waiters.wake_one(NameKeyView{traits.kind, name}); }

std::vector<std::string> HoldKind::set_intents(KindContext& e, Connection& c, const std::vector<std::string>& names,
                                        std::int64_t lease_us) {
  return e.rows().set_intent(c, traits.kind, names, e.client_key(), lease_us);
}

void HoldKind::clear_intent(KindContext& e, Connection& c, std::string_view name) {
  e.rows().clear_intent(c, traits.kind, name, e.client_key());
}

std::size_t HoldKind::force(KindContext& e, Connection& c, std::string_view name) {
  return e.rows().force(c, traits.kind, name);
}

}  // namespace dlock::details
