// Election: a (client, name[, owner]) forwarding to the engine's elections.
#include "dlock/election.hpp"

#include <stdexcept>

#include "base/identity.hpp"
#include "dlock/distributed_lock.hpp"
#include "engine/engine.hpp"

namespace dlock {

std::uint64_t Election::owner() const { return owner_ != 0 ? owner_ : details::current_thread_id(); }

std::uint64_t Election::campaign(std::string_view value) {
  details::Engine& e = *client_->engine_;
  details::AcquireRequest r = e.make_request(details::NameKeyView{details::Kind::kElection, name_}, owner(),
                                             std::nullopt, std::nullopt);
  r.value = std::string(value);
  const auto term = e.campaign(r);
  if (!term) throw std::logic_error("dlock: a campaign without a deadline ended without leadership");
  return *term;
}

std::optional<std::uint64_t> Election::try_campaign(std::string_view value, Millis wait) {
  details::Engine& e = *client_->engine_;
  details::AcquireRequest r =
      e.make_request(details::NameKeyView{details::Kind::kElection, name_}, owner(), std::nullopt, wait);
  r.value = std::string(value);
  return e.campaign(r);
}

void Election::proclaim(std::string_view value) { client_->engine_->proclaim(name_, owner(), value); }

void Election::resign() { client_->engine_->resign(name_, owner()); }

bool Election::is_leader() const {
  return client_->engine_->confirmed_hold(details::NameKeyView{details::Kind::kElection, name_}, owner()).has_value();
}

std::string Election::guard_sql() const {
  return client_->engine_->guard_sql({details::NameKey(details::Kind::kElection, name_)}, owner());
}

LeaderView Election::leader() const { return details::to_leader_view(client_->engine_->election(name_)); }

std::optional<LeaderView> Election::observe(std::uint64_t after_revision, Millis wait) const {
  details::Engine& e = *client_->engine_;
  const auto row = e.observe(e.make_observe_request(name_, owner(), after_revision, wait));
  if (!row) return std::nullopt;
  return details::to_leader_view(*row);
}

}  // namespace dlock
