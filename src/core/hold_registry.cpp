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

bool HoldRegistry::is_ours(std::uint64_t hold_id) const {
  std::lock_guard<std::mutex> guard(mutex_);
  return hold_id != 0 && live_ids_.count(hold_id) != 0;
}

void HoldRegistry::record_fresh(std::string_view name, std::uint64_t owner, std::uint64_t hold_id, unsigned count,
                                bool watchdog, SteadyTime deadline, std::uint64_t fence,
                                std::uint64_t doorbell_session, std::uint32_t slot) {
  std::lock_guard<std::mutex> guard(mutex_);
  Hold h;
  h.hold_id = hold_id;
  h.count = count;
  h.fence = fence;
  h.watchdog = watchdog;
  h.generation = next_generation_++;
  h.doorbell_session = doorbell_session;
  h.deadline = deadline;
  h.slot = slot;
  auto [it, inserted] = holds_.try_emplace(key(name, owner), Entry{std::string(name), owner, h});
  if (!inserted) {
    live_ids_.erase(it->second.hold.hold_id);
    it->second.hold = h;
  }
  live_ids_.insert(hold_id);
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
  Hold before = it->second.hold;
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

std::size_t HoldRegistry::size() const {
  std::lock_guard<std::mutex> guard(mutex_);
  return holds_.size();
}

}  // namespace dlock::details
