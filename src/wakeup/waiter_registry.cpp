#include "wakeup/waiter_registry.hpp"

#include <thread>

namespace dlock::details {

std::shared_ptr<WaiterRegistry::Entry> WaiterRegistry::join(const NameKey& key) {
  auto& slot = entries_[key];
  if (!slot) slot = std::make_shared<Entry>();
  entry_count_.store(entries_.size());
  return slot;
}

void WaiterRegistry::leave_if_unused(const NameKey& key, Entry& entry) {
  if (entry.subscribers != 0 || !entry.watchers.empty()) return;
  entries_.erase(key);
  entry_count_.store(entries_.size());
}

void WaiterRegistry::tell_watchers(Entry& entry) {
  std::vector<std::shared_ptr<Watcher>> watchers;
  {
    std::lock_guard<std::mutex> guard(entry.mutex);
    watchers = entry.watchers;
  }
  for (auto& w : watchers) w->woken();
}

WaiterRegistry::Watch::Watch(WaiterRegistry& registry, NameKey key, std::shared_ptr<Watcher> watcher)
    : registry_(registry), key_(std::move(key)), watcher_(std::move(watcher)) {
  std::lock_guard<std::mutex> guard(registry_.mutex_);
  entry_ = registry_.join(key_);
  std::lock_guard<std::mutex> entry_guard(entry_->mutex);
  entry_->watchers.push_back(watcher_);
}

WaiterRegistry::Watch::~Watch() {
  std::lock_guard<std::mutex> guard(registry_.mutex_);
  std::lock_guard<std::mutex> entry_guard(entry_->mutex);
  auto& w = entry_->watchers;
  for (auto it = w.begin(); it != w.end(); ++it) {
    if (*it == watcher_) {
      w.erase(it);
      break;
    }
  }
  registry_.leave_if_unused(key_, *entry_);
}

WaiterRegistry::Subscription::Subscription(WaiterRegistry& registry, NameKey key)
    : registry_(registry), key_(std::move(key)) {
  std::lock_guard<std::mutex> guard(registry_.mutex_);
  entry_ = registry_.join(key_);
  std::lock_guard<std::mutex> entry_guard(entry_->mutex);
  ++entry_->subscribers;
  seen_wake_alls_ = entry_->wake_alls;
}

WaiterRegistry::Subscription::~Subscription() { unsubscribe(); }

void WaiterRegistry::Subscription::unsubscribe() {
  if (!subscribed_) return;
  subscribed_ = false;
  std::lock_guard<std::mutex> guard(registry_.mutex_);
  std::lock_guard<std::mutex> entry_guard(entry_->mutex);
  --entry_->subscribers;
  if (entry_->permits > entry_->subscribers) entry_->permits = entry_->subscribers;
  registry_.leave_if_unused(key_, *entry_);
}

bool WaiterRegistry::Subscription::wait_for(std::chrono::microseconds timeout) {
  std::unique_lock<std::mutex> lock(entry_->mutex);
  if (!entry_->cv.wait_for(lock, timeout,
                          [&] { return entry_->permits > 0 || entry_->wake_alls != seen_wake_alls_; }))
    return false;
  if (entry_->wake_alls != seen_wake_alls_) {
    seen_wake_alls_ = entry_->wake_alls;
  } else {
    --entry_->permits;
  }
  return true;
}

namespace {

// A claimed thread waits for its claim's resolution (the releaser's
// statement) awake, yielding its core to anything runnable, for about twice
// as long as resolutions recently took, and blocks after that. Why: a
// thread that blocked through the releaser's statement takes a while to
// run again on a virtual machine (bench/results/HISTORY.md has the
// figures), a sizeable part of a commit, and on a hot lock that wake-up is
// on the critical path of every handoff. When resolutions take longer than kAwakeAtMost (a slow or
// distant server), the wake-up is small beside them: the thread blocks at
// once rather than burn a core.
constexpr std::chrono::microseconds kAwakeAtMost{1000};

// A thread in wait_claimable, parked like a continuation.
class BlockedThread final : public WaiterRegistry::Parked {
 public:
  using Clock = std::chrono::steady_clock;
  BlockedThread(const void* request, const std::atomic<bool>* interrupted,
                std::atomic<std::int64_t>& resolution_us)
      : request_(request), interrupted_(interrupted), resolution_us_(resolution_us) {}
  void wake() override {
    {
      std::lock_guard<std::mutex> guard(mutex_);
      woken_.store(true);
    }
    cv_.notify_one();
  }
  void on_claimed() override {
    {
      std::lock_guard<std::mutex> guard(mutex_);
      claimed_at_ = Clock::now();
    }
    cv_.notify_one();
  }
  const void* handoff_request() const override {
    return interrupted_ != nullptr && interrupted_->load() ? nullptr : request_;
  }
  // Until woken, claimed or `timeout`: false on the timeout.
  bool wait_for(std::chrono::microseconds timeout) {
    std::unique_lock<std::mutex> lock(mutex_);
    return cv_.wait_for(lock, timeout, [&] { return woken_.load() || claimed_at_ != Clock::time_point{}; });
  }
  // Until woken; if claimed, awake for a while first, and then it learns
  // how long the resolution took.
  void wait() {
    Clock::time_point claimed_at;
    {
      std::lock_guard<std::mutex> guard(mutex_);
      claimed_at = claimed_at_;
    }
    if (claimed_at != Clock::time_point{}) {
      const std::int64_t typical = resolution_us_.load(std::memory_order_relaxed);
      if (typical > 0 && typical * 2 <= kAwakeAtMost.count()) {
        const auto until = claimed_at + std::chrono::microseconds(typical * 2);
        while (!woken_.load() && Clock::now() < until) std::this_thread::yield();
      }
    }
    {
      std::unique_lock<std::mutex> lock(mutex_);
      cv_.wait(lock, [&] { return woken_.load(); });
    }
    if (claimed_at != Clock::time_point{}) learn(Clock::now() - claimed_at);
  }

 private:
  // A moving average over the last few resolutions (weight 1/8 each).
  void learn(Clock::duration took) {
    const std::int64_t us = std::chrono::duration_cast<std::chrono::microseconds>(took).count();
    const std::int64_t was = resolution_us_.load(std::memory_order_relaxed);
    resolution_us_.store(was == 0 ? us : was + (us - was) / 8, std::memory_order_relaxed);
  }

  const void* const request_;
  const std::atomic<bool>* const interrupted_;
  std::atomic<std::int64_t>& resolution_us_;  // the registry's
  std::mutex mutex_;
  std::condition_variable cv_;
  // Set under mutex_ (so a blocked wait cannot miss it), read without it
  // by the awake wait.
  std::atomic<bool> woken_{false};
  Clock::time_point claimed_at_;  // guarded by mutex_; zero: not claimed
};

}  // namespace

WaiterRegistry::Subscription::Woken WaiterRegistry::Subscription::wait_claimable(std::chrono::microseconds timeout,
                                                                                const void* request,
                                                                                const std::atomic<bool>* interrupted,
                                                                                std::uint64_t* grant) {
  auto self = std::make_shared<BlockedThread>(request, interrupted, registry_.resolution_us_);
  if (!park(self)) return Woken::kWoken;  // a wake was waiting as a permit
  // Woken, or claimed: then its wake() comes once the releaser's statement
  // is done. Timed out: unless a wake or a claim took it out just now.
  if (!self->wait_for(timeout) && unpark(*self)) return Woken::kTimedOut;
  self->wait();
  const std::uint64_t handed = self->take_grant();
  if (handed == 0) return Woken::kWoken;
  if (grant != nullptr) *grant = handed;
  return Woken::kGranted;
}

bool WaiterRegistry::Subscription::park(std::shared_ptr<Parked> waiter) {
  std::lock_guard<std::mutex> guard(entry_->mutex);
  if (entry_->wake_alls != seen_wake_alls_) {
    seen_wake_alls_ = entry_->wake_alls;
    return false;
  }
  if (entry_->permits > 0) {
    --entry_->permits;
    return false;
  }
  Parked& w = *waiter;
  w.seen_wake_alls_ = &seen_wake_alls_;
  w.where_ = entry_->parked.insert(entry_->parked.end(), std::move(waiter));
  w.parked_ = true;
  return true;
}

bool WaiterRegistry::Subscription::unpark(Parked& waiter) {
  std::shared_ptr<Parked> keep;  // released after the entry's mutex
  std::lock_guard<std::mutex> guard(entry_->mutex);
  if (!waiter.parked_) return false;
  waiter.parked_ = false;
  keep = std::move(*waiter.where_);
  entry_->parked.erase(waiter.where_);
  return true;
}

std::shared_ptr<WaiterRegistry::Entry> WaiterRegistry::entry_of(NameKeyView key) const {
  // Nobody waits for anything (the usual case at a release): no lock. A
  // subscription counts its entry, sequentially consistently, before it
  // reads wakes(), and a wake counts itself before it reads this: one of
  // the two sees the other (see wakes()).
  if (entry_count_.load() == 0) return nullptr;
  std::lock_guard<std::mutex> guard(mutex_);
  auto it = entries_.find(key);
  return it == entries_.end() ? nullptr : it->second;
}

void WaiterRegistry::wake_one(NameKeyView key) {
  wakes_.fetch_add(1);  // before the look-up (see wakes())
  const auto entry = entry_of(key);
  if (!entry) return;
  tell_watchers(*entry);
  std::shared_ptr<Parked> continuation;
  {
    std::lock_guard<std::mutex> guard(entry->mutex);
    if (entry->permits >= entry->subscribers) return;
    if (counters_ != nullptr) counters_->woke(WakeSourceScope::current());
    if (!entry->parked.empty()) {
      // A parked continuation takes the wake directly (no permit left).
      continuation = std::move(entry->parked.front());
      entry->parked.pop_front();
      continuation->parked_ = false;
    } else {
      ++entry->permits;
    }
  }
  if (continuation) {
    continuation->wake();
  } else {
    entry->cv.notify_one();
  }
}

std::shared_ptr<WaiterRegistry::Parked> WaiterRegistry::claim(NameKeyView key) {
  const auto entry = entry_of(key);
  if (!entry) return nullptr;
  std::shared_ptr<Parked> claimed;
  {
    std::lock_guard<std::mutex> guard(entry->mutex);
    for (auto it = entry->parked.begin(); it != entry->parked.end(); ++it) {
      if ((*it)->handoff_request() == nullptr) continue;
      claimed = std::move(*it);
      entry->parked.erase(it);
      claimed->parked_ = false;
      break;
    }
  }
  if (claimed) {
    if (counters_ != nullptr) counters_->woke(WakeSourceScope::current());
    claimed->on_claimed();
  }
  return claimed;
}

void WaiterRegistry::resolve(const std::shared_ptr<Parked>& claimed, std::uint64_t grant) {
  claimed->grant_ = grant;
  claimed->wake();
}

void WaiterRegistry::wake_all(NameKeyView key) {
  wakes_.fetch_add(1);  // before the look-up (see wakes())
  const auto entry = entry_of(key);
  if (!entry) return;
  tell_watchers(*entry);
  std::list<std::shared_ptr<Parked>> continuations;
  {
    std::lock_guard<std::mutex> guard(entry->mutex);
    if (counters_ != nullptr && entry->subscribers > 0) counters_->woke(WakeSourceScope::current());
    continuations.swap(entry->parked);
    // Every subscriber that is not parked (blocked or about to look) sees
    // the new count once; the parked ones are woken directly.
    ++entry->wake_alls;
    for (auto& c : continuations) {
      c->parked_ = false;
      if (c->seen_wake_alls_ != nullptr) *c->seen_wake_alls_ = entry->wake_alls;
    }
  }
  for (auto& c : continuations) c->wake();
  entry->cv.notify_all();
}

std::vector<NameKey> WaiterRegistry::names() const {
  std::lock_guard<std::mutex> guard(mutex_);
  std::vector<NameKey> out;
  out.reserve(entries_.size());
  for (const auto& [name, entry] : entries_) out.push_back(name);
  return out;
}

void WaiterRegistry::tell_watchers(NameKeyView key) {
  if (const auto entry = entry_of(key)) tell_watchers(*entry);
}

bool WaiterRegistry::has_subscriber(NameKeyView key) const {
  const auto entry = entry_of(key);
  if (!entry) return false;
  std::lock_guard<std::mutex> guard(entry->mutex);
  return entry->subscribers > 0;
}

bool WaiterRegistry::has(NameKeyView key) const {
  if (entry_count_.load() == 0) return false;
  std::lock_guard<std::mutex> guard(mutex_);
  return entries_.find(key) != entries_.end();
}

std::size_t WaiterRegistry::parked() const {
  std::lock_guard<std::mutex> guard(mutex_);
  std::size_t n = 0;
  for (const auto& [name, entry] : entries_) {
    std::lock_guard<std::mutex> entry_guard(entry->mutex);
    n += entry->parked.size();
  }
  return n;
}

bool WaiterRegistry::empty() const {
  std::lock_guard<std::mutex> guard(mutex_);
  return entries_.empty();
}

}  // namespace dlock::details
