// DatabaseDistributedLock: the public face of the engine, and the place
// that puts it together (the kinds of hold it runs). The calling thread's
// owner is resolved here, at the surface; everything below acts for an
// explicit owner id.
#include "dlock/distributed_lock.hpp"

#include <algorithm>

#include "base/identity.hpp"
#include "base/kinds_table.hpp"
#include "base/validation.hpp"
#include "engine/engine.hpp"
#include "primitives/primitives.hpp"

namespace dlock {

namespace {
// A handle's owner id; 0 means "the calling thread".
std::uint64_t resolve(std::uint64_t owner) { return owner != 0 ? owner : details::current_thread_id(); }

// `name`, after it passed validate_name (a handle is checked when made).
std::string valid(std::string name) {
  details::validate_name(name);
  return name;
}

}  // namespace

Owner Owner::this_thread() noexcept { return Owner(details::current_thread_id()); }
Owner Owner::create() noexcept { return Owner(details::new_owner_id()); }

DatabaseDistributedLock::DatabaseDistributedLock(Options options)
    : engine_(details::make_engine(std::move(options))),
      primitives_(std::make_unique<details::Primitives>(*engine_)) {}

// The engine goes first: its asynchronous operations, which may use the
// primitives' objects, end in its destructor.
DatabaseDistributedLock::~DatabaseDistributedLock() { engine_.reset(); }

void DatabaseDistributedLock::lock(std::string_view name) { acquire_for(name, 0, std::nullopt, std::nullopt); }

void DatabaseDistributedLock::lock(std::string_view name, Millis lease) { acquire_for(name, 0, lease, std::nullopt); }

bool DatabaseDistributedLock::try_lock(std::string_view name) {
  return acquire_for(name, 0, std::nullopt, Millis::zero());
}

bool DatabaseDistributedLock::try_lock(std::string_view name, Millis wait) {
  return acquire_for(name, 0, std::nullopt, wait);
}

bool DatabaseDistributedLock::try_lock(std::string_view name, Millis wait, Millis lease) {
  return acquire_for(name, 0, lease, wait);
}

void DatabaseDistributedLock::unlock(std::string_view name) { release_for(name, 0); }

bool DatabaseDistributedLock::force_unlock(std::string_view name) { return force_unlock_side(name, Side::kMutex); }

bool DatabaseDistributedLock::is_locked(std::string_view name) { return is_locked_side(name, Side::kMutex); }

bool DatabaseDistributedLock::is_held_by_current_thread(std::string_view name) { return is_held_by(name, 0); }

int DatabaseDistributedLock::hold_count(std::string_view name) { return hold_count_for(name, 0); }

std::optional<Millis> DatabaseDistributedLock::remaining_ttl(std::string_view name) {
  return remaining_ttl_side(name, Side::kMutex);
}

std::uint64_t DatabaseDistributedLock::fencing_token(std::string_view name) { return fencing_token_for(name, 0); }

Lock DatabaseDistributedLock::get_lock(std::string name) { return Lock(this, valid(std::move(name)), 0); }

Lock DatabaseDistributedLock::get_lock(std::string name, Owner owner) {
  return Lock(this, valid(std::move(name)), owner.id());
}

Election DatabaseDistributedLock::get_election(std::string name) { return Election(this, valid(std::move(name)), 0); }

Election DatabaseDistributedLock::get_election(std::string name, Owner owner) {
  return Election(this, valid(std::move(name)), owner.id());
}

Lock DatabaseDistributedLock::get_fair_lock(std::string name) {
  return Lock(this, valid(std::move(name)), 0, Side::kFair);
}

Lock DatabaseDistributedLock::get_fair_lock(std::string name, Owner owner) {
  return Lock(this, valid(std::move(name)), owner.id(), Side::kFair);
}

ReadWriteLock DatabaseDistributedLock::get_read_write_lock(std::string name) {
  return ReadWriteLock(this, valid(std::move(name)), 0);
}

ReadWriteLock DatabaseDistributedLock::get_read_write_lock(std::string name, Owner owner) {
  return ReadWriteLock(this, valid(std::move(name)), owner.id());
}

namespace {
// Validated, sorted and without duplicates (MultiLock::names()).
std::vector<std::string> set_of(std::vector<std::string> names) {
  if (names.empty()) throw std::invalid_argument("dlock: a multi-lock needs at least one name");
  for (const auto& n : names) details::validate_name(n);
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  if (names.size() > details::kMaxSetNames) {
    throw std::invalid_argument("dlock: a multi-lock takes at most " + std::to_string(details::kMaxSetNames) +
                                " names, got " + std::to_string(names.size()));
  }
  return names;
}
}  // namespace

MultiLock DatabaseDistributedLock::get_multi_lock(std::vector<std::string> names) {
  return MultiLock(this, set_of(std::move(names)), 0);
}

MultiLock DatabaseDistributedLock::get_multi_lock(std::vector<std::string> names, Owner owner) {
  return MultiLock(this, set_of(std::move(names)), owner.id());
}

bool DatabaseDistributedLock::acquire_set_for(const std::vector<std::string>& names, std::uint64_t owner,
                                              std::optional<Millis> lease, std::optional<Millis> wait) {
  details::MultiLocks& locks = primitives_->multi_locks;
  return locks.acquire(locks.make_request(names, resolve(owner), lease, wait));
}

void DatabaseDistributedLock::release_set_for(const std::vector<std::string>& names, std::uint64_t owner) {
  primitives_->multi_locks.release(names, resolve(owner));
}

void DatabaseDistributedLock::cancel(Owner owner) { engine_->async().cancel_owner(owner.id()); }

const std::string& DatabaseDistributedLock::machine_id() const noexcept { return engine_->machine_id(); }

bool DatabaseDistributedLock::acquire_for(std::string_view name, std::uint64_t owner, std::optional<Millis> lease,
                                          std::optional<Millis> wait, Side side) {
  const details::AcquireRequest request =
      engine_->make_request(details::key_of(side, name), resolve(owner), lease, wait);
  return engine_->drive(request).next == details::AcquireStep::Next::kAcquired;
}

void DatabaseDistributedLock::release_for(std::string_view name, std::uint64_t owner, Side side, Millis at_least) {
  engine_->release(details::key_of(side, name), resolve(owner), at_least);
}

bool DatabaseDistributedLock::is_held_by(std::string_view name, std::uint64_t owner, Side side) {
  return engine_->confirmed_hold(details::key_of(side, name), resolve(owner)).has_value();
}

int DatabaseDistributedLock::hold_count_for(std::string_view name, std::uint64_t owner, Side side) {
  const auto hold = engine_->confirmed_hold(details::key_of(side, name), resolve(owner));
  return hold ? static_cast<int>(hold->count) : 0;
}

std::uint64_t DatabaseDistributedLock::fencing_token_for(std::string_view name, std::uint64_t owner, Side side) {
  return engine_->fencing_token(details::key_of(side, name), resolve(owner));
}

std::string DatabaseDistributedLock::guard_sql_for(const std::vector<std::string>& names, std::uint64_t owner,
                                                   Side side) {
  std::vector<details::NameKey> keys;
  keys.reserve(names.size());
  for (const auto& name : names) keys.emplace_back(details::key_of(side, name));
  return engine_->guard_sql(keys, resolve(owner));
}

bool DatabaseDistributedLock::force_unlock_side(std::string_view name, Side side) {
  return engine_->force_release(details::key_of(side, name)) > 0;
}

bool DatabaseDistributedLock::is_locked_side(std::string_view name, Side side) {
  return engine_->is_locked(details::key_of(side, name));
}

std::optional<Millis> DatabaseDistributedLock::remaining_ttl_side(std::string_view name, Side side) {
  return engine_->remaining_ttl(details::key_of(side, name));
}

}  // namespace dlock
