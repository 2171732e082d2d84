#include "wakeup/bell_watcher.hpp"

#include "base/kinds_table.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <iterator>

#include "base/identity.hpp"
#include "base/printable.hpp"
#include "sql/connection_pool.hpp"

namespace dlock::details {

std::function<bool()> BellWatcher::still_waiting(const Slot& slot) {
  return [waiting = slot.waiting, wait = slot.waiting->load()] { return wait != 0 && waiting->load() == wait; };
}

BellWatcher::BellWatcher(ConnectionSettings settings, const HoldRows& rows, std::uint64_t own_tag, std::size_t slots,
                         int wait_seconds,
                         std::shared_ptr<spdlog::logger> logger, Hooks hooks, std::chrono::milliseconds close_idle_after,
                         int turn_wait_seconds)
    : settings_(std::move(settings)),
      rows_(rows),
      own_tag_(own_tag),
      wait_seconds_(wait_seconds),
      turn_wait_seconds_(turn_wait_seconds > 0 ? turn_wait_seconds : wait_seconds),
      close_idle_after_(close_idle_after),
      logger_(std::move(logger)),
      hooks_(std::move(hooks)) {
  for (std::size_t i = 0; i < slots; ++i) slots_.push_back(std::make_unique<Slot>());
}

BellWatcher::~BellWatcher() { stop(); }

void BellWatcher::stop() {
  std::unique_lock<std::mutex> lock(mutex_);
  stopping_ = true;
  work_.notify_all();
  // A KILL QUERY sent just before the statement reaches the server is lost,
  // so it is repeated until every blocked session has come back.
  for (;;) {
    std::vector<std::pair<SessionAddress, std::function<bool()>>> blocked;
    for (auto& slot : slots_)
      if (slot->blocked && slot->server_id != 0)
        blocked.emplace_back(SessionAddress{slot->server_id, slot->server_index}, still_waiting(*slot));
    if (blocked.empty()) break;
    lock.unlock();
    for (auto& [address, check] : blocked) hooks_.interrupt(address, check);
    lock.lock();
    work_.wait_for(lock, std::chrono::milliseconds(200), [&] {
      return std::none_of(slots_.begin(), slots_.end(), [](const auto& s) { return s->blocked; });
    });
  }
  lock.unlock();
  for (auto& slot : slots_)
    if (slot->thread.joinable()) slot->thread.join();
}

void BellWatcher::arm(const NameKey& key) {
  std::lock_guard<std::mutex> guard(mutex_);
  if (stopping_) return;
  if (auto it = watching_.find(key); it != watching_.end()) {
    // A disarm() may be on its way for an earlier waiter: this one still
    // wants them. A name with a scout (a connection still choosing its
    // bell) needs no other; one that takes turns has a single connection.
    bool scouting = false;
    for (Slot* slot : it->second) {
      slot->cancelled = false;
      slot->leave = false;
      if (slot->resting) {
        // Refused again after the ring: watch again from its place.
        slot->resting = false;
        slot->bell.clear();
        work_.notify_all();
        return;
      }
      // Between two rounds (its thread settling): it keeps watching.
      if (!slot->blocked) slot->rearmed = true;
      scouting = scouting || slot->bell.empty();
    }
    if (scouting || policy(key.kind) != WakePolicy::kEveryone) return;
  }
  for (auto& slot : slots_) {
    if (slot->key || slot->blocked) continue;
    assign(*slot, key, std::string());
    return;
  }
  if (std::find(queued_.begin(), queued_.end(), key) == queued_.end()) queued_.push_back(key);
}

void BellWatcher::assign(Slot& slot, const NameKey& key, const std::string& bell) {
  slot.key = key;
  slot.bell = bell;
  slot.cancelled = false;
  slot.resting = false;
  slot.leave = false;
  if (policy(key.kind) != WakePolicy::kEveryone) places_.fetch_add(1);
  watching_[key].push_back(&slot);
  if (!slot.thread.joinable()) slot.thread = std::thread([this, s = &slot] { run(*s); });
  work_.notify_all();
}

void BellWatcher::unassign(Slot& slot) {
  if (!slot.key) return;
  if (policy(slot.key->kind) != WakePolicy::kEveryone) places_.fetch_sub(1);
  slot.resting = false;
  slot.leave = false;
  if (auto it = watching_.find(*slot.key); it != watching_.end()) {
    auto& list = it->second;
    list.erase(std::remove(list.begin(), list.end(), &slot), list.end());
    if (list.empty()) watching_.erase(it);
  }
  slot.key.reset();
  slot.bell.clear();
}

void BellWatcher::adopt_queued(Slot& slot) {
  while (!queued_.empty()) {
    const NameKey key = queued_.front();
    queued_.erase(queued_.begin());
    if (watching_.find(key) == watching_.end() && hooks_.waited(key)) {
      assign(slot, key, std::string());
      return;
    }
  }
}

void BellWatcher::disarm(const NameKey& key) {
  std::vector<std::pair<SessionAddress, std::function<bool()>>> interrupts;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    silent_.erase(key);
    after_ring_.erase(key);
    queued_.erase(std::remove(queued_.begin(), queued_.end(), key), queued_.end());
    auto it = watching_.find(key);
    if (it == watching_.end()) return;
    const std::vector<Slot*> slots = it->second;
    for (Slot* slot : slots) {
      if (!slot->blocked) {
        // Assigned, not started yet, or resting: its thread gives its
        // place back (if it has one) and takes the assignment back.
        slot->resting = false;
        slot->leave = true;
        work_.notify_all();
        continue;
      }
      if (slot->cancelled) continue;
      slot->cancelled = true;
      interrupts.emplace_back(SessionAddress{slot->server_id, slot->server_index}, still_waiting(*slot));
    }
  }
  for (auto& [address, check] : interrupts)
    if (address.server_id != 0) hooks_.interrupt(address, std::move(check));
}

void BellWatcher::settled(const NameKey& key) {
  if (places_.load() == 0) return;
  std::lock_guard<std::mutex> guard(mutex_);
  const auto it = watching_.find(key);
  if (it == watching_.end()) return;
  for (Slot* slot : it->second) {
    if (!slot->resting) continue;  // still watching: another waiter here may want it
    slot->resting = false;
    slot->leave = true;
    work_.notify_all();
  }
}

bool BellWatcher::watching(const NameKey& key) const {
  std::lock_guard<std::mutex> guard(mutex_);
  const auto it = watching_.find(key);
  if (it == watching_.end()) return false;
  // A client waiting in turn is covered from the moment it queues.
  const bool turns = policy(key.kind) != WakePolicy::kEveryone;
  return std::any_of(it->second.begin(), it->second.end(), [&](const Slot* s) {
    return (s->blocked && (turns || !s->bell.empty())) || s->resting;
  });
}

std::string BellWatcher::choose_bell(Slot& slot, const NameKey& key, const std::vector<std::string>& bells) {
  std::lock_guard<std::mutex> guard(mutex_);
  const auto watched = [&](const std::string& bell) {
    const auto it = watching_.find(key);
    if (it == watching_.end()) return false;
    return std::any_of(it->second.begin(), it->second.end(), [&](const Slot* s) { return s->bell == bell; });
  };
  std::vector<std::string> unwatched;
  for (const auto& bell : bells)
    if (!watched(bell) && std::find(unwatched.begin(), unwatched.end(), bell) == unwatched.end())
      unwatched.push_back(bell);
  if (unwatched.empty()) return std::string();
  slot.bell = unwatched.front();
  if (policy(key.kind) != WakePolicy::kEveryone) return slot.bell;  // one connection per name
  // The others to free connections, a few per name.
  std::size_t watching = watching_[key].size();
  for (std::size_t i = 1; i < unwatched.size() && watching < kBellsPerName && !stopping_; ++i) {
    for (auto& other : slots_) {
      if (other->key || other->blocked) continue;
      assign(*other, key, unwatched[i]);
      ++watching;
      break;
    }
  }
  return slot.bell;
}

BellWatcher::Round BellWatcher::round(Connection& c, Slot& slot, const NameKey& key) {
  switch (policy(key.kind)) {
    case WakePolicy::kEveryone:
      break;
    case WakePolicy::kLine:
      if (slot.place.empty()) {
        const std::string line = hooks_.line(key);
        switch (wait_in_line(c, line, turn_wait_seconds_, logger_)) {
          case LineWait::kFront:
            slot.place = line;
            break;
          case LineWait::kTimedOut:
            return Round::kTimedOut;
          case LineWait::kInterrupted:
            return Round::kInterrupted;
        }
      }
      break;
    case WakePolicy::kChain:
      return follow(c, slot, key);
  }
  return watch(c, slot, key);
}

BellWatcher::Round BellWatcher::follow(Connection& c, Slot& slot, const NameKey& key) {
  const QueuePlace place = hooks_.queue_place(c, key);
  // No entry of this client left: granted (or it left); its waiters look.
  if (place.mine == 0) {
    give_place_back(slot);
    return Round::kReleased;
  }
  const std::string mine = entry_lock_name(place.mine);
  if (slot.place != mine) {
    give_place_back(slot);
    // Not taken (the client behind looked at it just then): that client
    // then watches the head's bell, as every client did before turns.
    if (take_lock_now(c, mine, logger_)) slot.place = mine;
  }
  if (place.before == 0) return watch(c, slot, key);
  // A few waits before reading the queue again: an entry that stays first
  // for minutes costs one statement per wait, not two.
  constexpr int kWaitsPerLook = 3;
  const std::string before = entry_lock_name(place.before);
  for (int i = 0; i < kWaitsPerLook; ++i) {
    switch (wait_for_bell(c, before, turn_wait_seconds_, logger_)) {
      case BellWait::kRung:
        return Round::kMoved;  // granted, left or gone: look again
      case BellWait::kInterrupted:
        return Round::kInterrupted;
      case BellWait::kTimedOut:
        continue;
      case BellWait::kFree:
        // Nobody keeps that entry's lock (its client has no bell
        // connection free, or fast wake-up off): watch the head's bell.
        return watch(c, slot, key);
    }
  }
  return Round::kTimedOut;
}

void BellWatcher::give_place_back(Slot& slot) {
  if (slot.place.empty()) return;
  const std::string place = std::move(slot.place);
  slot.place.clear();
  if (!slot.connection || slot.connection->broken()) return;  // it went with the session
  try {
    give_back_lock(*slot.connection, place, logger_);
  } catch (const std::exception& e) {
    // Marked broken: closing it gives the place back.
    logger_->debug("dlock: could not give back {}: {}", place, e.what());
    slot.connection.reset();
  }
}

BellWatcher::Round BellWatcher::watch(Connection& c, Slot& slot, const NameKey& key) {
  // Read, mark, then wait in statements of their own: a statement that read
  // the table while it blocked in GET_LOCK would hold a read view open for
  // the whole wait, and hold back purge for seconds.
  const std::vector<Kind> kinds = hooks_.blockers(key.kind);
  const auto foreign = [&](const HoldRows::Watched& w) { return w.hold_id >> 48 != own_tag_; };
  const auto rows = rows_.watched(c, kinds, key.name);
  if (rows.empty() && hooks_.park && !hooks_.subscribed(key)) {
    const auto how = hooks_.park(c, key, wait_seconds_, [&] { return rows_.watched(c, kinds, key.name).empty(); });
    if (how) return parked(slot, *how);
  }
  std::vector<std::string> bells;
  bool any_foreign = false;
  bool unmarked = false;
  for (const auto& w : rows) {
    if (!foreign(w)) continue;
    any_foreign = true;
    if (w.bell.empty()) continue;
    bells.push_back(w.bell);
    unmarked = unmarked || !w.marked;
  }
  // No hold of another client: the ones it was refused by have ended, or
  // are this client's (whose releases wake it here).
  if (!any_foreign) return Round::kReleased;
  if (bells.empty()) return Round::kNoBell;
  std::string bell;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    bell = slot.bell;
  }
  if (bell.empty()) {
    bell = choose_bell(slot, key, bells);
    if (bell.empty()) return Round::kCovered;  // other connections watch every bell
  } else if (std::find(bells.begin(), bells.end(), bell) == bells.end()) {
    // Its hold ended (or moved on to its session's next bell): look again.
    return Round::kReleased;
  }
  // Still a foreign hold with that bell, marked (its release rings)?
  const auto still_there = [&](bool must_be_marked) {
    for (const auto& w : rows_.watched(c, kinds, key.name))
      if (foreign(w) && w.bell == bell && (w.marked || !must_be_marked)) return true;
    return false;
  };
  // 0 marked: the holds ended or moved on to their sessions' next bells
  // (or another waiter marked them just now).
  if (unmarked && rows_.mark(c, kinds, key.name, own_tag_) == 0 && !still_there(true)) return Round::kReleased;
  switch (wait_for_bell(c, bell, wait_seconds_, logger_)) {
    case BellWait::kRung:
      return Round::kRung;
    case BellWait::kTimedOut:
      return Round::kTimedOut;
    case BellWait::kInterrupted:
      return Round::kInterrupted;
    case BellWait::kFree:
      // Rung between the read and the wait, or its session is gone.
      return still_there(false) ? Round::kNoBell : Round::kReleased;
  }
  return Round::kInterrupted;
}

BellWatcher::Round BellWatcher::parked(Slot& slot, Parked how) {
  switch (how) {
    case Parked::kNoPlace:
      return Round::kNoBell;  // leave it to the poll
    case Parked::kTaken:
      return Round::kReleased;
    case Parked::kTimedOut:
      return Round::kTimedOut;
    case Parked::kInterrupted:
      break;
  }
  // A take's KILL (wake the observers) or this watcher's own (disarmed,
  // stopping: settle sees `cancelled` / stopping_).
  std::lock_guard<std::mutex> guard(mutex_);
  return slot.cancelled || stopping_ ? Round::kInterrupted : Round::kRung;
}

void BellWatcher::run(Slot& slot) {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    if (!wait_for_work(lock, slot)) continue;
    if (stopping_) return;
    if (slot.leave) {
      leave(lock, slot);
      continue;
    }
    if (!slot.key) continue;
    const NameKey key = *slot.key;
    slot.blocked = true;
    slot.waiting->store(++slot.waits);
    lock.unlock();
    bool failed = false;
    const Round round = watch_once(slot, key, failed);
    lock.lock();
    after_round(lock, slot, key, round, failed);
  }
}

bool BellWatcher::wait_for_work(std::unique_lock<std::mutex>& lock, Slot& slot) {
  const auto has_work = [&] { return stopping_ || slot.leave || (slot.key.has_value() && !slot.resting); };
  if (slot.resting) {
    if (!work_.wait_until(lock, slot.rest_until, has_work)) {
      // Nothing ended the rest: watch again from its place.
      slot.resting = false;
      slot.bell.clear();
    }
  } else if (!slot.connection) {
    work_.wait(lock, has_work);
  } else if (!work_.wait_for(lock, close_idle_after_, has_work)) {
    // Unused for a while: close it, outside the lock (closing a socket
    // can block).
    slot.server_id = 0;
    std::unique_ptr<Connection> closing = std::move(slot.connection);
    lock.unlock();
    closing.reset();
    lock.lock();
    return false;
  }
  return true;
}

void BellWatcher::leave(std::unique_lock<std::mutex>& lock, Slot& slot) {
  slot.leave = false;
  slot.rearmed = false;
  lock.unlock();
  give_place_back(slot);
  lock.lock();
  if (slot.rearmed && !stopping_) {
    slot.rearmed = false;  // armed again meanwhile: watch again
    slot.bell.clear();
    return;
  }
  unassign(slot);
  if (!stopping_) adopt_queued(slot);
  work_.notify_all();
}

BellWatcher::Round BellWatcher::watch_once(Slot& slot, const NameKey& key, bool& failed) {
  try {
    // A connection idle for a while may have been closed by the server
    // (wait_timeout): find out with a ping rather than by losing a wait.
    if (slot.connection && !slot.connection->broken() &&
        std::chrono::steady_clock::now() - slot.connection->last_used() > ConnectionPool::kPingAfterIdle)
      slot.connection->ping();
    if (slot.connection && slot.connection->broken()) slot.connection.reset();
    if (!slot.connection) {
      slot.connection = Connection::open(settings_);
      std::lock_guard<std::mutex> guard(mutex_);
      slot.server_id = slot.connection->server_id();
      slot.server_index = slot.connection->server_index();
    }
    return round(*slot.connection, slot, key);
  } catch (const std::exception& e) {
    failed = true;
    logger_->debug("dlock: bell connection for {} {} failed; the poller covers it: {}", kind_name(key.kind),
                   printable(key.name), e.what());
    slot.connection.reset();
    slot.place.clear();  // it went with the session
    return Round::kInterrupted;
  }
}

void BellWatcher::after_round(std::unique_lock<std::mutex>& lock, Slot& slot, const NameKey& key, Round round,
                              bool failed) {
  slot.blocked = false;
  slot.waiting->store(0);
  if (failed) slot.server_id = 0;
  bool ring_now = false;
  std::chrono::milliseconds ring_delay{0};
  slot.rearmed = false;
  const bool keep = !failed && settle(slot, round, ring_now, ring_delay);
  if (!keep) {
    if (!slot.place.empty()) {
      lock.unlock();
      give_place_back(slot);
      lock.lock();
    }
    // Armed again while its place went back: a new round, from the back.
    if (slot.rearmed && !stopping_ && policy(key.kind) != WakePolicy::kEveryone) {
      slot.rearmed = false;
      slot.bell.clear();
    } else {
      unassign(slot);
      if (!stopping_) adopt_queued(slot);
    }
  }
  work_.notify_all();  // the destructor waits for blocked == false
  if (ring_now && ring_delay.count() > 0) work_.wait_for(lock, ring_delay, [&] { return stopping_; });
  if (ring_now || failed) {
    // A failed watch wakes the waiters too: they try the row and arm
    // again, on a fresh connection. Without the lock: the hook takes the
    // waiter registry's.
    lock.unlock();
    hooks_.ring(key);
    lock.lock();
  }
  // Do not hammer a server that refuses connections: pause this slot.
  if (failed && !stopping_) work_.wait_for(lock, std::chrono::seconds(1), [&] { return stopping_; });
}

bool BellWatcher::settle(Slot& slot, Round round, bool& ring_now, std::chrono::milliseconds& ring_delay) {
  if (stopping_) return false;
  const NameKey& key = *slot.key;
  const auto now = std::chrono::steady_clock::now();
  const bool turns = policy(key.kind) != WakePolicy::kEveryone;
  // Taking turns, a connection keeps its place while the woken waiter
  // tries (see the header comment).
  const auto rest = [&] {
    if (!turns || slot.cancelled || !hooks_.waited(key)) return false;
    slot.resting = true;
    slot.rest_until = now + kRestFor;
    slot.bell.clear();
    return true;
  };
  switch (round) {
    case Round::kRung:
      silent_.erase(key);
      // Forget rings long past, so the map stays as small as the names in play.
      for (auto it = after_ring_.begin(); it != after_ring_.end();)
        it = now - it->second.at > std::chrono::seconds(1) ? after_ring_.erase(it) : std::next(it);
      after_ring_[key] = AfterRing{now, 0};
      ring_now = true;
      return rest();  // a woken waiter that is refused arms again
    case Round::kNoBell: {
      if (auto rang = after_ring_.find(key); rang != after_ring_.end()) {
        if (rang->second.free_seen < kReleaseInFlightRetries) {
          // The release that rang may not have committed yet: try again soon.
          ring_delay = std::chrono::milliseconds(1 << rang->second.free_seen);
          ++rang->second.free_seen;
          ring_now = true;
          return rest();
        }
        after_ring_.erase(rang);
      }
      auto [it, first] = silent_.emplace(key, true);
      ring_now = first;  // once: the row may have been freed just before we looked
      if (!hooks_.waited(key)) silent_.erase(it);
      return rest();
    }
    case Round::kReleased:
      silent_.erase(key);
      after_ring_.erase(key);
      ring_now = true;
      return rest();
    case Round::kTimedOut:
      silent_.erase(key);
      after_ring_.erase(key);
      return !slot.cancelled && hooks_.waited(key);
    case Round::kInterrupted:
      return !slot.cancelled && hooks_.waited(key);
    case Round::kCovered:
      return false;
    case Round::kMoved:
      // The entry before this client's moved on: look again at once.
      slot.bell.clear();
      return !slot.cancelled && hooks_.waited(key);
  }
  return false;
}

}  // namespace dlock::details
