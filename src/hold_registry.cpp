#include "hold_registry.hpp"

#include <set>

namespace dlock::details {

std::string HoldRegistry::key(std::string_view name, std::uint64_t thread) {
  // Names never contain NUL, so NUL separates them from the thread id.
  std::string k;
  k.reserve(name.size() + 1 + sizeof thread);
  k.append(name);
  k.push_back('\0');
  k.append(reinterpret_cast<const char*>(&thread), sizeof thread);
  return k;
}

std::optional<Hold> HoldRegistry::find(std::string_view name, std::uint64_t thread) const {
  std::lock_guard<std::mutex> guard(mutex_);
  auto it = holds_.find(key(name, thread));
  if (it == holds_.end()) return std::nullopt;
  return it->second.hold;
}

void HoldRegistry::record_acquire(std::string_view name, std::uint64_t thread, unsigned count, bool watchdog,
                                  SteadyTime deadline, std::uint64_t fence, bool fresh,
                                  std::uint64_t doorbell_session) {
  std::lock_guard<std::mutex> guard(mutex_);
  auto [it, inserted] = holds_.try_emplace(key(name, thread), Entry{std::string(name), thread, Hold{}});
  Hold& h = it->second.hold;
  h.count = count;
  h.watchdog = watchdog;
  h.deadline = deadline;
  if (fresh || inserted) {
    h.generation = next_generation_++;
    h.lost = false;
    h.fence = fence;
    h.doorbell_session = doorbell_session;
  } else if (fence != 0) {
    h.fence = fence;
  }
}

std::optional<Hold> HoldRegistry::take_one(std::string_view name, std::uint64_t thread) {
  std::lock_guard<std::mutex> guard(mutex_);
  auto it = holds_.find(key(name, thread));
  if (it == holds_.end()) return std::nullopt;
  Hold before = it->second.hold;
  if (--it->second.hold.count == 0) holds_.erase(it);
  return before;
}

std::optional<Hold> HoldRegistry::mark_lost(std::string_view name, std::uint64_t thread, std::uint64_t generation) {
  std::lock_guard<std::mutex> guard(mutex_);
  auto it = holds_.find(key(name, thread));
  if (it == holds_.end() || it->second.hold.generation != generation || it->second.hold.lost) return std::nullopt;
  it->second.hold.lost = true;
  Hold before = it->second.hold;
  it->second.hold.doorbell_session = 0;
  return before;
}

void HoldRegistry::set_fence(std::string_view name, std::uint64_t thread, std::uint64_t generation,
                             std::uint64_t fence) {
  std::lock_guard<std::mutex> guard(mutex_);
  auto it = holds_.find(key(name, thread));
  if (it != holds_.end() && it->second.hold.generation == generation) it->second.hold.fence = fence;
}

std::vector<HoldRef> HoldRegistry::watchdog_holds() const {
  std::lock_guard<std::mutex> guard(mutex_);
  std::vector<HoldRef> refs;
  for (const auto& [k, e] : holds_) {
    if (e.hold.watchdog && !e.hold.lost)
      refs.push_back(HoldRef{e.name, e.thread, e.hold.generation, e.hold.fence, e.hold.deadline});
  }
  return refs;
}

void HoldRegistry::extend(const std::vector<HoldRef>& refs, SteadyTime deadline) {
  std::lock_guard<std::mutex> guard(mutex_);
  for (const auto& r : refs) {
    auto it = holds_.find(key(r.name, r.thread));
    if (it != holds_.end() && it->second.hold.generation == r.generation && !it->second.hold.lost &&
        it->second.hold.watchdog && it->second.hold.deadline < deadline)
      it->second.hold.deadline = deadline;
  }
}

std::vector<std::string> HoldRegistry::names() const {
  std::lock_guard<std::mutex> guard(mutex_);
  std::set<std::string> distinct;
  for (const auto& [k, e] : holds_) distinct.insert(e.name);
  return {distinct.begin(), distinct.end()};
}

std::size_t HoldRegistry::size() const {
  std::lock_guard<std::mutex> guard(mutex_);
  return holds_.size();
}

}  // namespace dlock::details
