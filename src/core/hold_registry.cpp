#include "core/hold_registry.hpp"

namespace dlock::details {

std::string HoldRegistry::key(std::string_view name, std::uint64_t owner) {
  // Names never contain NUL, so NUL separates them from the owner id.
  std::string k;
  k.reserve(name.size() + 1 + sizeof owner);
  k.append(name);
  k.push_back('\0');
  k.append(reinterpret_cast<const char*>(&owner), sizeof owner);
  return k;
}

std::optional<Hold> HoldRegistry::find(std::string_view name, std::uint64_t owner) const {
  std::lock_guard<std::mutex> guard(mutex_);
  auto it = holds_.find(key(name, owner));
  if (it == holds_.end()) return std::nullopt;
  return it->second.hold;
}

std::optional<SteadyTime> HoldRegistry::live_deadline(std::string_view name) const {
  std::lock_guard<std::mutex> guard(mutex_);
  return live_deadline_locked(std::string(name));
}

HoldRegistry::NameView HoldRegistry::view(std::string_view name, std::uint64_t owner) const {
  NameView view;
  std::lock_guard<std::mutex> guard(mutex_);
  if (const auto it = holds_.find(key(name, owner)); it != holds_.end()) view.own = it->second.hold;
  view.live_until = live_deadline_locked(std::string(name));
  return view;
}

std::optional<SteadyTime> HoldRegistry::live_deadline_locked(const std::string& name) const {
  const auto by_name = live_by_name_.find(name);
  if (by_name == live_by_name_.end()) return std::nullopt;
  const auto it = holds_.find(by_name->second);
  if (it == holds_.end() || it->second.hold.lost) return std::nullopt;
  if (it->second.hold.deadline <= std::chrono::steady_clock::now()) return std::nullopt;
  return it->second.hold.deadline;
}

void HoldRegistry::forget_live(const std::string& name, const std::string& k) {
  const auto it = live_by_name_.find(name);
  if (it != live_by_name_.end() && it->second == k) live_by_name_.erase(it);
}

bool HoldRegistry::is_ours(std::uint64_t hold_id) const {
  std::lock_guard<std::mutex> guard(mutex_);
  return hold_id != 0 && live_ids_.count(hold_id) != 0;
}

void HoldRegistry::record_fresh(std::string_view name, std::uint64_t owner, std::uint64_t hold_id, unsigned count,
                                bool watchdog, SteadyTime deadline, std::uint64_t fence,
                                std::uint64_t doorbell_session, std::uint32_t slot, SteadyTime chain_started) {
  Hold h;
  h.hold_id = hold_id;
  h.count = count;
  h.fence = fence;
  h.watchdog = watchdog;
  h.doorbell_session = doorbell_session;
  h.deadline = deadline;
  h.slot = slot;
  h.chain_started = chain_started;
  std::lock_guard<std::mutex> guard(mutex_);
  h.generation = next_generation_++;
  const std::string k = key(name, owner);
  live_by_name_[std::string(name)] = k;
  auto [it, inserted] = holds_.try_emplace(k, Entry{std::string(name), owner, h});
  if (!inserted) {
    live_ids_.erase(it->second.hold.hold_id);
    forget_session(it->second.hold.doorbell_session, k);
    it->second.hold = h;
  }
  live_ids_.insert(h.hold_id);
  if (doorbell_session != 0) by_session_[doorbell_session].insert(k);
}

void HoldRegistry::forget_session(std::uint64_t session, const std::string& k) {
  if (session == 0) return;
  const auto it = by_session_.find(session);
  if (it == by_session_.end()) return;
  it->second.erase(k);
  if (it->second.empty()) by_session_.erase(it);
}

bool HoldRegistry::record_reentrant(std::string_view name, std::uint64_t owner, std::uint64_t generation,
                                    unsigned count, bool watchdog, SteadyTime deadline) {
  std::lock_guard<std::mutex> guard(mutex_);
  auto it = holds_.find(key(name, owner));
  if (it == holds_.end() || it->second.hold.generation != generation || it->second.hold.lost) return false;
  Hold& h = it->second.hold;
  h.count = count;
  h.watchdog = watchdog;
  h.deadline = deadline;
  return true;
}

std::optional<Hold> HoldRegistry::take_one(std::string_view name, std::uint64_t owner) {
  std::lock_guard<std::mutex> guard(mutex_);
  auto it = holds_.find(key(name, owner));
  if (it == holds_.end()) return std::nullopt;
  Hold before = it->second.hold;
  if (--it->second.hold.count == 0) {
    live_ids_.erase(before.hold_id);
    forget_live(it->second.name, it->first);
    forget_session(before.doorbell_session, it->first);
    holds_.erase(it);
  }
  return before;
}

std::optional<Hold> HoldRegistry::mark_lost(std::string_view name, std::uint64_t owner, std::uint64_t generation) {
  std::lock_guard<std::mutex> guard(mutex_);
  auto it = holds_.find(key(name, owner));
  if (it == holds_.end() || it->second.hold.generation != generation || it->second.hold.lost) return std::nullopt;
  it->second.hold.lost = true;
  live_ids_.erase(it->second.hold.hold_id);
  forget_live(it->second.name, it->first);
  Hold before = it->second.hold;
  forget_session(before.doorbell_session, it->first);
  it->second.hold.doorbell_session = 0;
  return before;
}

void HoldRegistry::set_fence(std::string_view name, std::uint64_t owner, std::uint64_t generation,
                             std::uint64_t fence) {
  std::lock_guard<std::mutex> guard(mutex_);
  auto it = holds_.find(key(name, owner));
  if (it != holds_.end() && it->second.hold.generation == generation) it->second.hold.fence = fence;
}

std::vector<HoldRef> HoldRegistry::watchdog_holds() const {
  std::lock_guard<std::mutex> guard(mutex_);
  std::vector<HoldRef> refs;
  for (const auto& [k, e] : holds_) {
    if (e.hold.watchdog && !e.hold.lost)
      refs.push_back(HoldRef{e.name, e.owner, e.hold.hold_id, e.hold.generation, e.hold.fence, e.hold.deadline});
  }
  return refs;
}

void HoldRegistry::extend(const std::vector<HoldRef>& refs, SteadyTime deadline) {
  std::lock_guard<std::mutex> guard(mutex_);
  for (const auto& r : refs) {
    auto it = holds_.find(key(r.name, r.owner));
    if (it != holds_.end() && it->second.hold.generation == r.generation && !it->second.hold.lost &&
        it->second.hold.watchdog && it->second.hold.deadline < deadline)
      it->second.hold.deadline = deadline;
  }
}

std::vector<NamedHold> HoldRegistry::live() const {
  std::lock_guard<std::mutex> guard(mutex_);
  std::vector<NamedHold> out;
  for (const auto& [k, e] : holds_)
    if (!e.hold.lost) out.push_back(NamedHold{e.name, e.hold.hold_id});
  return out;
}

std::vector<NamedHold> HoldRegistry::on_session(std::uint64_t session) const {
  std::lock_guard<std::mutex> guard(mutex_);
  std::vector<NamedHold> out;
  const auto keys = by_session_.find(session);
  if (keys == by_session_.end()) return out;
  for (const auto& k : keys->second) {
    const auto it = holds_.find(k);
    if (it != holds_.end()) out.push_back(NamedHold{it->second.name, it->second.hold.hold_id});
  }
  return out;
}

std::size_t HoldRegistry::size() const {
  std::lock_guard<std::mutex> guard(mutex_);
  return holds_.size();
}

}  // namespace dlock::details
