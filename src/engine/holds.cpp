#include "engine/holds.hpp"

#include <algorithm>
#include <chrono>

namespace dlock::details {

HoldRegistry::OwnerHold* HoldRegistry::owner_in(NameHolds& holds, std::uint64_t owner) {
  for (auto& h : holds.owners)
    if (h.owner == owner) return &h;
  return nullptr;
}

const HoldRegistry::OwnerHold* HoldRegistry::owner_in(const NameHolds& holds, std::uint64_t owner) {
  for (const auto& h : holds.owners)
    if (h.owner == owner) return &h;
  return nullptr;
}

HoldRegistry::OwnerHold* HoldRegistry::find_locked(NameKeyView key, std::uint64_t owner) {
  const auto it = names_.find(key);
  return it == names_.end() ? nullptr : owner_in(it->second, owner);
}

std::optional<Hold> HoldRegistry::find(NameKeyView key, std::uint64_t owner) const {
  std::lock_guard<std::mutex> guard(mutex_);
  const auto it = names_.find(key);
  if (it == names_.end()) return std::nullopt;
  const OwnerHold* h = owner_in(it->second, owner);
  if (h == nullptr) return std::nullopt;
  return h->hold;
}

std::optional<SteadyTime> HoldRegistry::live_deadline(NameKeyView key) const {
  std::lock_guard<std::mutex> guard(mutex_);
  const auto it = names_.find(key);
  if (it == names_.end()) return std::nullopt;
  return live_deadline_locked(it->second);
}

HoldRegistry::NameView HoldRegistry::view(NameKeyView key, std::uint64_t owner) const {
  NameView view;
  std::lock_guard<std::mutex> guard(mutex_);
  const auto it = names_.find(key);
  if (it == names_.end()) return view;
  if (const OwnerHold* h = owner_in(it->second, owner)) view.own = h->hold;
  view.live_until = live_deadline_locked(it->second);
  return view;
}

std::optional<SteadyTime> HoldRegistry::live_deadline_locked(const NameHolds& holds) {
  if (!holds.has_live) return std::nullopt;
  const OwnerHold* h = owner_in(holds, holds.live_owner);
  if (h == nullptr || h->hold.lost) return std::nullopt;
  if (h->hold.deadline <= std::chrono::steady_clock::now()) return std::nullopt;
  return h->hold.deadline;
}

void HoldRegistry::forget_live(NameHolds& holds, std::uint64_t owner) {
  if (holds.has_live && holds.live_owner == owner) holds.has_live = false;
}

void HoldRegistry::note_idle(NameHolds& holds) {
  if (!holds.owners.empty()) return;
  ++idle_names_;
  if (idle_names_ <= kIdleNamesKept || 2 * idle_names_ <= names_.size()) return;
  for (auto it = names_.begin(); it != names_.end();) it = it->second.owners.empty() ? names_.erase(it) : std::next(it);
  idle_names_ = 0;
}

void HoldRegistry::add_session(std::uint64_t session, const HoldKey& key) {
  if (session != 0) by_session_[session].insert(key);
}

void HoldRegistry::forget_session(std::uint64_t session, const HoldKey& key) {
  if (session == 0) return;
  const auto it = by_session_.find(session);
  if (it == by_session_.end()) return;
  it->second.erase(key);
  if (it->second.empty() && by_session_.size() > kSessionsKept) by_session_.erase(it);
}

void HoldRegistry::index_deadline(const HoldKey& key, const Hold& hold, SteadyTime& earliest) {
  deadlines_.emplace(hold.deadline, hold.generation);
  by_generation_.insert_or_assign(hold.generation, key);
  earliest = std::min(earliest, hold.deadline);
}

void HoldRegistry::unindex_deadline(const Hold& hold) {
  if (by_generation_.erase(hold.generation) != 0) deadlines_.erase({hold.deadline, hold.generation});
}

void HoldRegistry::tell_earlier(SteadyTime earliest) const {
  if (earliest != SteadyTime::max() && earlier_deadline_) earlier_deadline_(earliest);
}

void HoldRegistry::record_fresh(NameKeyView name, std::uint64_t owner, const Hold& hold) {
  Hold h = hold;
  h.lost = false;
  if (h.acquired == SteadyTime{}) h.acquired = std::chrono::steady_clock::now();
  SteadyTime earliest = SteadyTime::max();
  std::unique_lock<std::mutex> guard(mutex_);
  h.generation = next_generation_++;
  auto it = names_.find(name);
  if (it == names_.end()) {
    it = names_.try_emplace(NameKey(name)).first;
  } else if (it->second.owners.empty()) {
    --idle_names_;
  }
  NameHolds& holds = it->second;
  holds.has_live = true;
  holds.live_owner = owner;
  const HoldKey key{&*it, owner};
  if (OwnerHold* existing = owner_in(holds, owner)) {
    forget_session(existing->hold.bell_session, key);
    unindex_deadline(existing->hold);
    existing->hold = h;
  } else {
    holds.owners.push_back(OwnerHold{owner, h});
    ++holds_;
  }
  add_session(h.bell_session, key);
  index_deadline(key, h, earliest);
  guard.unlock();
  tell_earlier(earliest);
}

bool HoldRegistry::record_reentrant(NameKeyView name, std::uint64_t owner, std::uint64_t generation,
                                    unsigned count, bool watchdog, SteadyTime deadline) {
  SteadyTime earliest = SteadyTime::max();
  {
    std::lock_guard<std::mutex> guard(mutex_);
    const auto it = names_.find(name);
    OwnerHold* found = it == names_.end() ? nullptr : owner_in(it->second, owner);
    if (found == nullptr || found->hold.generation != generation || found->hold.lost) return false;
    Hold& h = found->hold;
    if (h.deadline <= std::chrono::steady_clock::now()) return false;  // past its deadline: lost
    unindex_deadline(h);
    h.count = count;
    h.watchdog = watchdog;
    h.deadline = deadline;
    index_deadline(HoldKey{&*it, owner}, h, earliest);
  }
  tell_earlier(earliest);
  return true;
}

std::optional<Hold> HoldRegistry::take_one(NameKeyView name, std::uint64_t owner) {
  std::lock_guard<std::mutex> guard(mutex_);
  const auto it = names_.find(name);
  if (it == names_.end()) return std::nullopt;
  NameHolds& holds = it->second;
  OwnerHold* found = owner_in(holds, owner);
  if (found == nullptr) return std::nullopt;
  Hold before = found->hold;
  if (--found->hold.count == 0) {
    forget_live(holds, owner);
    forget_session(before.bell_session, HoldKey{&*it, owner});
    unindex_deadline(before);
    *found = std::move(holds.owners.back());
    holds.owners.pop_back();
    --holds_;
    note_idle(holds);
  }
  return before;
}

std::optional<Hold> HoldRegistry::mark_lost(NameKeyView name, std::uint64_t owner, std::uint64_t generation) {
  std::lock_guard<std::mutex> guard(mutex_);
  const auto it = names_.find(name);
  if (it == names_.end()) return std::nullopt;
  OwnerHold* found = owner_in(it->second, owner);
  if (found == nullptr || found->hold.generation != generation || found->hold.lost) return std::nullopt;
  found->hold.lost = true;
  forget_live(it->second, owner);
  unindex_deadline(found->hold);
  Hold before = found->hold;
  forget_session(before.bell_session, HoldKey{&*it, owner});
  found->hold.bell_session = 0;
  return before;
}

bool HoldRegistry::learn(NameKeyView name, std::uint64_t owner, std::uint64_t generation, std::uint64_t fence,
                         std::uint64_t slot) {
  std::lock_guard<std::mutex> guard(mutex_);
  OwnerHold* found = find_locked(name, owner);
  if (found == nullptr || found->hold.generation != generation || found->hold.lost) return false;
  found->hold.fence = fence;
  found->hold.slot = slot;
  return true;
}

std::vector<HoldRef> HoldRegistry::watchdog_holds() const {
  std::lock_guard<std::mutex> guard(mutex_);
  std::vector<HoldRef> refs;
  for (const auto& [key, holds] : names_) {
    for (const auto& [owner, h] : holds.owners) {
      if (h.watchdog && !h.lost) refs.push_back(HoldRef{key, h.slot, owner, h.hold_id, h.generation, h.fence, h.deadline});
    }
  }
  return refs;
}

void HoldRegistry::extend(const std::vector<HoldRef>& refs, SteadyTime deadline) {
  const auto now = std::chrono::steady_clock::now();
  SteadyTime earliest = SteadyTime::max();
  {
    std::lock_guard<std::mutex> guard(mutex_);
    for (const auto& r : refs) {
      const auto it = names_.find(r.key);
      OwnerHold* found = it == names_.end() ? nullptr : owner_in(it->second, r.owner);
      if (found == nullptr) continue;
      Hold& h = found->hold;
      // Past its deadline, a hold is lost (the clock says so at once),
      // whatever a late answer says.
      if (h.generation != r.generation || h.lost || !h.watchdog || h.deadline >= deadline || h.deadline <= now)
        continue;
      unindex_deadline(h);
      h.deadline = deadline;
      index_deadline(HoldKey{&*it, r.owner}, h, earliest);
    }
  }
  tell_earlier(earliest);
}

std::vector<HoldRef> HoldRegistry::due(SteadyTime now) const {
  std::lock_guard<std::mutex> guard(mutex_);
  std::vector<HoldRef> refs;
  for (auto d = deadlines_.begin(); d != deadlines_.end() && d->first <= now; ++d) {
    const auto where = by_generation_.find(d->second);
    if (where == by_generation_.end()) continue;
    const OwnerHold* h = owner_in(where->second.name->second, where->second.owner);
    if (h == nullptr || h->hold.generation != d->second) continue;
    refs.push_back(HoldRef{where->second.name->first, h->hold.slot, h->owner, h->hold.hold_id, h->hold.generation,
                           h->hold.fence, h->hold.deadline});
  }
  return refs;
}

SteadyTime HoldRegistry::next_deadline() const {
  std::lock_guard<std::mutex> guard(mutex_);
  return deadlines_.empty() ? SteadyTime::max() : deadlines_.begin()->first;
}

std::vector<HeldRow> HoldRegistry::live() const {
  std::lock_guard<std::mutex> guard(mutex_);
  std::vector<HeldRow> out;
  for (const auto& [key, holds] : names_) {
    for (const auto& [owner, h] : holds.owners)
      if (!h.lost) out.push_back(HeldRow{RowKey{key.kind, key.name, h.slot}, h.hold_id});
  }
  return out;
}

std::vector<HeldRow> HoldRegistry::on_session(std::uint64_t session) const {
  std::lock_guard<std::mutex> guard(mutex_);
  std::vector<HeldRow> out;
  const auto keys = by_session_.find(session);
  if (keys == by_session_.end()) return out;
  for (const HoldKey& k : keys->second) {
    if (const OwnerHold* h = owner_in(k.name->second, k.owner))
      out.push_back(HeldRow{RowKey{k.name->first.kind, k.name->first.name, h->hold.slot}, h->hold.hold_id});
  }
  return out;
}

std::array<std::size_t, 8> HoldRegistry::live_by_kind() const {
  std::array<std::size_t, 8> out{};
  std::lock_guard<std::mutex> guard(mutex_);
  for (const auto& [key, holds] : names_) {
    for (const auto& [owner, h] : holds.owners)
      if (!h.lost) ++out[static_cast<std::size_t>(key.kind)];
  }
  return out;
}

std::size_t HoldRegistry::size() const {
  std::lock_guard<std::mutex> guard(mutex_);
  return holds_;
}

}  // namespace dlock::details
