// Election: a (client, name[, owner]) forwarding to the election primitive
// (primitives/election/elections.hpp) and, for what every hold has, the engine.
#include "dlock/election.hpp"

#include <stdexcept>

#include "base/identity.hpp"
#include "dlock/distributed_lock.hpp"
#include "engine/engine.hpp"
#include "primitives/primitives.hpp"

namespace dlock {

std::uint64_t Election::owner() const { return owner_ != 0 ? owner_ : details::current_thread_id(); }

std::uint64_t Election::campaign(std::string_view value) {
  details::AcquireRequest r = client_->engine_->make_request(details::Elections::key(name_), owner(), std::nullopt,
                                                            std::nullopt);
  r.value = std::string(value);
  const auto term = client_->primitives_->elections.campaign(r);
  if (!term) throw std::logic_error("dlock: a campaign without a deadline ended without leadership");
  return *term;
}

std::optional<std::uint64_t> Election::try_campaign(std::string_view value, Millis wait) {
  details::AcquireRequest r = client_->engine_->make_request(details::Elections::key(name_), owner(), std::nullopt, wait);
  r.value = std::string(value);
  return client_->primitives_->elections.campaign(r);
}

void Election::proclaim(std::string_view value) { client_->primitives_->elections.proclaim(name_, owner(), value); }

void Election::resign() { client_->primitives_->elections.resign(name_, owner()); }

bool Election::is_leader() const {
  return client_->engine_->confirmed_hold(details::Elections::key(name_), owner()).has_value();
}

std::string Election::guard_sql() const {
  return client_->engine_->guard_sql({details::Elections::key(name_)}, owner());
}

LeaderView Election::leader() const { return details::to_leader_view(client_->primitives_->elections.row(name_)); }

std::optional<LeaderView> Election::observe(std::uint64_t after_revision, Millis wait) const {
  details::Elections& elections = client_->primitives_->elections;
  const auto row = elections.observe(elections.make_observe_request(name_, owner(), after_revision, wait));
  if (!row) return std::nullopt;
  return details::to_leader_view(*row);
}

}  // namespace dlock
