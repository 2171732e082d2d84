// Where local waiters wait, one entry per (kind, name) (the seed's
// subscribeMap), each with a counting semaphore of wake-ups.
//
// Two kinds of waiter share an entry: a blocked thread (the synchronous
// driver, Subscription::wait_for) and a parked continuation (the
// asynchronous driver, Subscription::park), which costs memory, not a
// thread. A wake goes to a parked continuation if there is one (it is
// removed from the entry and its Parked::wake() is called), else to a
// blocked thread, else it is kept as a permit for the next waiter to look.
//
// Handoff: a lock or permit waiter may wait as a claimable waiter (a parked
// continuation whose handoff_request() names its request, or a thread in
// Subscription::wait_claimable). A release that has such a waiter can
// claim() it, take it out of the entry as a wake would, hand the hold (or
// permit) to it in the database, and resolve() the claim: the waiter then
// resumes already holding it (Parked::take_grant()), or, when the handoff did not
// happen, simply tries again. A claimed waiter does not give up on its own
// (a timeout or a cancellation finds it no longer parked) until resolved.
// A claimed thread is told at the claim and waits for the resolution awake
// for a short while (Parked::on_claimed), so on a hot lock its wake-up is
// not added to every handoff.
//
// A waiter stays subscribed until it gives up or succeeds, so a wake that
// arrives between a failed attempt and the wait is kept as a permit instead
// of being lost. An asynchronous waiter subscribes before its first attempt
// in the database; a blocking one (Engine::drive) only once that attempt
// was refused, so an uncontended lock never comes here, and it reads
// wakes() before the attempt and after subscribing: a wake counted in
// between may have found no subscriber, and it tries again at once.
// Permits never exceed the number of subscribers, so a burst of wakes cannot
// pile up into a stampede later. A wake is only a hint: a woken waiter
// always tries again in the database.
//
// Thread safety: every member is safe to call concurrently. Parked::wake()
// is called with no registry lock held.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "base/keys.hpp"
#include "metrics/metric_counters.hpp"

namespace dlock::details {

class WaiterRegistry {
  struct Entry;

 public:
  // A continuation waiting for a wake (see Subscription::park).
  class Parked {
   public:
    virtual ~Parked() = default;
    // The waiter was woken: it is no longer parked and should try again.
    // Called once per successful park, from the waking thread (or once per
    // claim, from the resolving one).
    virtual void wake() = 0;
    // Called once by claim(), with no registry lock held, when a release
    // takes this waiter for a handoff: its resolution follows once the
    // releaser's statement is done. A blocked thread wakes now and waits
    // for the resolution awake (for about twice as long as resolutions
    // have recently taken, never over 1 ms), so its wake-up overlaps the
    // statement instead of following it. Must not block. Default: nothing.
    virtual void on_claimed() {}
    // Non-null while the waiter accepts a hold handed straight to it: what
    // the hold is handed over for (the engine's request; opaque here).
    // Called under the entry's mutex by claim(); must not block. Default:
    // only wakes.
    virtual const void* handoff_request() const { return nullptr; }
    // Once after a wake that came with the hold handed over (see
    // resolve()): what was handed (1 for a lock hold, a permit's id);
    // consumes it. 0: nothing was handed.
    std::uint64_t take_grant() { return grant_.exchange(0); }
    // Without consuming it: true inside wake() when the wake comes with the
    // hold handed over.
    bool granted() const { return grant_.load() != 0; }

   private:
    friend class WaiterRegistry;
    std::atomic<std::uint64_t> grant_{0};
    bool parked_ = false;  // guarded by the entry's mutex
    std::uint64_t* seen_wake_alls_ = nullptr;  // its subscription's, while parked (the entry's mutex)
    std::list<std::shared_ptr<Parked>>::iterator where_;
  };

  // RAII: subscribed for its lifetime.
  class Subscription {
   public:
    Subscription(WaiterRegistry& registry, NameKey key);
    ~Subscription();
    Subscription(const Subscription&) = delete;
    Subscription& operator=(const Subscription&) = delete;
    // Blocks the calling thread until woken or `timeout` passes. True if woken.
    bool wait_for(std::chrono::microseconds timeout);
    enum class Woken { kTimedOut, kWoken, kGranted };
    // The same for a waiter that accepts a handoff: the thread waits as a
    // parked waiter whose handoff_request() is `request` (while
    // `interrupted`, which may be null, is false). kGranted: a release
    // handed it the hold, and `grant` (if not null) gets what was handed
    // (see take_grant). Once claimed it waits for the claim's resolution
    // even past `timeout` (the releaser's statement, within its budget).
    Woken wait_claimable(std::chrono::microseconds timeout, const void* request,
                         const std::atomic<bool>* interrupted, std::uint64_t* grant = nullptr);
    // Parks `waiter` until a wake: false (not parked) if a wake is already
    // waiting as a permit; the caller then consumes it and tries again now.
    // A waiter is parked at most once at a time.
    [[nodiscard]] bool park(std::shared_ptr<Parked> waiter);
    // Takes `waiter` out of the entry if it is still parked: true then (the
    // caller resumes it, e.g. on its timeout); false if a wake took it out
    // first (its wake() has been or is being called).
    [[nodiscard]] bool unpark(Parked& waiter);
    // Ends the subscription now rather than at destruction (idempotent; the
    // owner must not be parked). A continuation's operation ends before the
    // last reference to it goes.
    void unsubscribe();

   private:
    WaiterRegistry& registry_;
    NameKey key_;
    std::shared_ptr<Entry> entry_;
    bool subscribed_ = true;
    // The entry's wake_alls this subscriber has been woken for (the
    // entry's mutex): each wake_all wakes each subscriber once.
    std::uint64_t seen_wake_alls_ = 0;
  };

  // Something told of every wake of some names without taking part in
  // them (a set of names waited for together: a MultiLock). It is no
  // subscriber: it takes no wake away from the waiters of a name, is
  // never claimed for a handoff and keeps no permits; it only hears of
  // each wake_one() and wake_all() on the names it watches (and keeps
  // those names in names() and has(), so the poller and the bell watcher
  // cover them). `woken` runs with no registry lock held, on the waking
  // thread; it must not block.
  class Watcher {
   public:
    virtual ~Watcher() = default;
    virtual void woken() = 0;
  };
  // RAII: `watcher` watches `key` for its lifetime.
  class Watch {
   public:
    Watch(WaiterRegistry& registry, NameKey key, std::shared_ptr<Watcher> watcher);
    ~Watch();
    Watch(const Watch&) = delete;
    Watch& operator=(const Watch&) = delete;

   private:
    WaiterRegistry& registry_;
    NameKey key_;
    std::shared_ptr<Entry> entry_;
    std::shared_ptr<Watcher> watcher_;
  };

  // Where wakes that reach a subscriber are counted, by the calling
  // thread's WakeSourceScope (null: nowhere). Set before any wake.
  void count_wakes_in(MetricCounters* counters) { counters_ = counters; }
  // Wakes one waiter of `name`, if any (and tells its watchers).
  void wake_one(NameKeyView key);
  // How many wake_one() and wake_all() calls have begun, over every name.
  // For a first attempt made before subscribing (Engine::drive): a wake
  // that found no subscriber yet was counted before it looked, so reading
  // the count after subscribing tells whether one may have been missed.
  std::uint64_t wakes() const { return wakes_.load(); }
  // Takes the longest-parked waiter of `name` with a handoff_request() out
  // of the entry, as a wake would, and tells it (Parked::on_claimed). Null
  // if there is none. The caller must resolve() it exactly once, promptly:
  // the waiter waits for that.
  [[nodiscard]] std::shared_ptr<Parked> claim(NameKeyView key);
  // Ends a claim: `grant` nonzero = the hold was handed over, and this is
  // what the waiter's take_grant() returns when it resumes (1 for a lock
  // hold, a permit's id); 0 = it just tries again.
  static void resolve(const std::shared_ptr<Parked>& claimed, std::uint64_t grant);
  // What a release holds while it tries to hand its hold to a claimed
  // waiter: resolves the claim when it goes, as granted (with what grant()
  // was given) once grant() was called, else as a wake. Declared before the release takes its owner
  // lock, so the waiter (which may resume on the releasing thread) is told
  // only after that lock is let go.
  class ClaimedWaiter {
   public:
    ClaimedWaiter() = default;
    ~ClaimedWaiter() {
      if (waiter) resolve(waiter, grant_);
    }
    ClaimedWaiter(const ClaimedWaiter&) = delete;
    ClaimedWaiter& operator=(const ClaimedWaiter&) = delete;
    // `what`: 1 for a lock hold, the permit's id for a permit (never 0).
    void grant(std::uint64_t what = 1) { grant_ = what; }
    std::shared_ptr<Parked> waiter;  // null: none claimed

   private:
    std::uint64_t grant_ = 0;
  };
  // Wakes every waiter of `name` (and tells its watchers).
  void wake_all(NameKeyView key);
  // Tells the watchers of `name` (only them: no waiter is woken), e.g.
  // that it was taken.
  void tell_watchers(NameKeyView key);
  // True while `name` has a subscriber (a waiter that will take it; a
  // watcher alone does not count).
  bool has_subscriber(NameKeyView key) const;
  // Names with at least one subscriber or watcher (for the poller).
  std::vector<NameKey> names() const;
  bool empty() const;
  // Continuations parked now, over every name (tests, benchmarks).
  std::size_t parked() const;
  // True while `name` has a subscriber or a watcher.
  bool has(NameKeyView key) const;

 private:
  struct Entry {
    std::mutex mutex;
    std::condition_variable cv;
    std::size_t subscribers = 0;
    std::size_t permits = 0;     // wake_one's, for whichever subscriber looks first
    std::uint64_t wake_alls = 0;  // wake_all's, one for every subscriber
    std::list<std::shared_ptr<Parked>> parked;  // in the order they parked
    std::vector<std::shared_ptr<Watcher>> watchers;
  };
  std::shared_ptr<Entry> entry_of(NameKeyView key) const;
  std::shared_ptr<Entry> join(const NameKey& key);  // under mutex_
  void leave_if_unused(const NameKey& key, Entry& entry);  // under mutex_ and entry.mutex
  static void tell_watchers(Entry& entry);

  mutable std::mutex mutex_;
  NameKeyMap<std::shared_ptr<Entry>> entries_;
  // entries_.size(), written under mutex_, read without it (entry_of).
  std::atomic<std::size_t> entry_count_{0};
  std::atomic<std::uint64_t> wakes_{0};  // see wakes()
  MetricCounters* counters_ = nullptr;
  // How long a claimed thread's claim typically took to be resolved, in
  // microseconds (0: not measured yet): how long it waits awake for it.
  std::atomic<std::int64_t> resolution_us_{0};
};

}  // namespace dlock::details
