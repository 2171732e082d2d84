#include "wakeup/doorbell.hpp"

#include <cppconn/exception.h>
#include <cppconn/prepared_statement.h>
#include <cppconn/resultset.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <iterator>

#include "sql/connection_pool.hpp"
#include "core/log_format.hpp"

namespace dlock::details {

namespace {

// FNV-1a over the bytes, then a SplitMix64 finaliser for better mixing; two
// different starting points give two independent 64-bit halves. The hash is
// part of the wire protocol between clients: changing it makes old and new
// clients miss each other's rings (safe, but slow), so it never changes.
std::uint64_t hash64(std::string_view bytes, std::uint64_t seed) {
  std::uint64_t h = 14695981039346656037ULL ^ seed;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  h += 0x9e3779b97f4a7c15ULL;
  h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ULL;
  h = (h ^ (h >> 27)) * 0x94d049bb133111ebULL;
  return h ^ (h >> 31);
}

void append_hex(std::string& out, std::uint64_t v) {
  static const char digits[] = "0123456789abcdef";
  for (int shift = 60; shift >= 0; shift -= 4) out.push_back(digits[(v >> shift) & 0xf]);
}

}  // namespace

std::string doorbell_name(std::string_view database, std::string_view table, std::string_view name) {
  // Lengths make the concatenation unambiguous.
  std::string key;
  key.reserve(database.size() + table.size() + name.size() + 24);
  key += std::to_string(database.size()) + ":" + std::string(database);
  key += std::to_string(table.size()) + ":" + std::string(table);
  key += name;
  std::string out = "dlock:";
  append_hex(out, hash64(key, 0));
  append_hex(out, hash64(key, 0x5bd1e9955bd1e995ULL));
  return out;
}

bool interrupt_doorbell_wait(Connection& killer, SessionAddress session) {
  if (killer.server_index() != session.server_index) return false;
  const std::uint64_t server_id = session.server_id;
  try {
    auto& ps = killer.prepared(
        "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = ? AND USER = "
        "SUBSTRING_INDEX(CURRENT_USER(), '@', 1) AND LEFT(INFO, CHAR_LENGTH(?)) = ?");
    ps.setUInt64(1, server_id);
    ps.setString(2, LockTable::kDoorbellWaitPrefix);
    ps.setString(3, LockTable::kDoorbellWaitPrefix);
    bool ours = false;
    {
      std::unique_ptr<sql::ResultSet> rs(ps.executeQuery());
      ours = rs->next() && rs->getInt(1) == 1;
    }
    if (!ours) return false;
    killer.execute_plain("KILL QUERY " + std::to_string(server_id));
    return true;
  } catch (const sql::SQLException& e) {
    if (e.getErrorCode() == mysql_error::kUnknownThread) return false;  // ended meanwhile: nothing to stop
    if (e.getErrorCode() == 0 || is_connection_error(e.getErrorCode())) killer.mark_broken();
    throw to_backend_error(e, "interrupting a doorbell wait");
  }
}

std::function<bool()> DoorbellWatcher::still_waiting(const Slot& slot) {
  return [waiting = slot.waiting, wait = slot.waiting->load()] { return wait != 0 && waiting->load() == wait; };
}

DoorbellWatcher::DoorbellWatcher(ConnectionSettings settings, const LockTable& table, std::string database,
                                 std::size_t slots, int wait_seconds, std::shared_ptr<spdlog::logger> logger,
                                 Hooks hooks, std::chrono::milliseconds close_idle_after)
    : settings_(std::move(settings)),
      table_(table),
      database_(std::move(database)),
      wait_seconds_(wait_seconds),
      close_idle_after_(close_idle_after),
      logger_(std::move(logger)),
      hooks_(std::move(hooks)) {
  for (std::size_t i = 0; i < slots; ++i) slots_.push_back(std::make_unique<Slot>());
}

DoorbellWatcher::~DoorbellWatcher() {
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
    for (auto& [id, check] : blocked) hooks_.interrupt(id, check);
    lock.lock();
    work_.wait_for(lock, std::chrono::milliseconds(200), [&] {
      for (auto& slot : slots_)
        if (slot->blocked) return false;
      return true;
    });
  }
  lock.unlock();
  for (auto& slot : slots_)
    if (slot->thread.joinable()) slot->thread.join();
}

void DoorbellWatcher::arm(const std::string& name) {
  std::lock_guard<std::mutex> guard(mutex_);
  if (stopping_) return;
  if (auto it = watching_.find(name); it != watching_.end()) {
    // A disarm() may be on its way for an earlier waiter: this one still wants it.
    it->second->cancelled = false;
    return;
  }
  for (auto& slot : slots_) {
    if (!slot->name.empty() || slot->blocked) continue;
    assign(*slot, name);
    return;
  }
  // Every dedicated connection is busy: the poller covers this name until
  // one frees up and adopts it.
  if (std::find(queued_.begin(), queued_.end(), name) == queued_.end()) queued_.push_back(name);
}

void DoorbellWatcher::assign(Slot& slot, const std::string& name) {
  slot.name = name;
  slot.cancelled = false;
  watching_.emplace(name, &slot);
  if (!slot.thread.joinable()) slot.thread = std::thread([this, s = &slot] { run(*s); });
  work_.notify_all();
}

void DoorbellWatcher::adopt_queued(Slot& slot) {
  while (!queued_.empty()) {
    const std::string name = queued_.front();
    queued_.erase(queued_.begin());
    if (watching_.count(name) == 0 && hooks_.waited(name)) {
      assign(slot, name);
      return;
    }
  }
}

void DoorbellWatcher::disarm(const std::string& name) {
  SessionAddress interrupt;
  std::function<bool()> check;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    silent_.erase(name);
    after_ring_.erase(name);
    queued_.erase(std::remove(queued_.begin(), queued_.end(), name), queued_.end());
    auto it = watching_.find(name);
    if (it == watching_.end()) return;
    Slot& slot = *it->second;
    if (!slot.blocked) {
      // Assigned, not started yet: just take the assignment back.
      slot.name.clear();
      watching_.erase(it);
      adopt_queued(slot);
      return;
    }
    if (slot.cancelled) return;
    slot.cancelled = true;
    interrupt = SessionAddress{slot.server_id, slot.server_index};
    check = still_waiting(slot);
  }
  if (interrupt.server_id != 0) hooks_.interrupt(interrupt, std::move(check));
}

void DoorbellWatcher::run(Slot& slot) {
  std::unique_lock<std::mutex> lock(mutex_);
  const auto has_work = [&] { return stopping_ || !slot.name.empty(); };
  for (;;) {
    if (!slot.connection) {
      work_.wait(lock, has_work);
    } else if (!work_.wait_for(lock, close_idle_after_, has_work)) {
      // Unused for a while: close it. Outside the lock, since closing a
      // socket can block; an arm() meanwhile finds the slot idle and this
      // thread opens a fresh connection for it.
      slot.server_id = 0;
      std::unique_ptr<Connection> closing = std::move(slot.connection);
      lock.unlock();
      closing.reset();
      lock.lock();
      continue;
    }
    if (stopping_) return;
    const std::string name = slot.name;
    slot.blocked = true;
    slot.waiting->store(++slot.waits);
    lock.unlock();

    LockTable::Ring ring = LockTable::Ring::kInterrupted;
    bool failed = false;
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
      ring = is_lock_name_key(name)
                 ? table_.wait_for_release(*slot.connection, name, wait_seconds_, hooks_.ours)
                 : table_.wait_for_doorbell(*slot.connection, doorbell_name(database_, table_.table(), name),
                                            wait_seconds_);
    } catch (const std::exception& e) {
      failed = true;
      logger_->debug("dlock: doorbell connection for {} failed; the poller covers it: {}", printable(name),
                     e.what());
      slot.connection.reset();
    }

    lock.lock();
    slot.blocked = false;
    slot.waiting->store(0);
    if (failed) slot.server_id = 0;
    bool ring_now = false;
    std::chrono::milliseconds ring_delay{0};
    const bool keep = !failed && settle(slot, ring, ring_now, ring_delay);
    if (!keep) {
      watching_.erase(name);
      slot.name.clear();
      if (!stopping_) adopt_queued(slot);
    }
    work_.notify_all();  // the destructor waits for blocked == false
    if (ring_now && ring_delay.count() > 0) work_.wait_for(lock, ring_delay, [&] { return stopping_; });
    if (ring_now || failed) {
      // A failed channel wakes the waiter too: it tries the row and arms
      // again, on a fresh connection. Called without the lock: the hook
      // takes the waiter registry's.
      lock.unlock();
      hooks_.ring(name);
      lock.lock();
    }
    if (failed && !stopping_) {
      // Do not hammer a server that refuses connections: pause this slot.
      work_.wait_for(lock, std::chrono::seconds(1), [&] { return stopping_; });
    }
  }
}

bool DoorbellWatcher::settle(Slot& slot, LockTable::Ring ring, bool& ring_now, std::chrono::milliseconds& ring_delay) {
  if (stopping_) return false;
  const std::string& name = slot.name;
  const auto now = std::chrono::steady_clock::now();
  switch (ring) {
    case LockTable::Ring::kRung:
      silent_.erase(name);
      // Forget rings long past (names whose waiter got the row and never
      // armed again), so the map stays as small as the names in play.
      for (auto it = after_ring_.begin(); it != after_ring_.end();)
        it = now - it->second.at > std::chrono::seconds(1) ? after_ring_.erase(it) : std::next(it);
      after_ring_[name] = AfterRing{now, 0};
      ring_now = true;
      return false;  // the woken waiter arms again if it is refused
    case LockTable::Ring::kNoDoorbell: {
      if (auto rang = after_ring_.find(name); rang != after_ring_.end()) {
        if (rang->second.free_seen < kReleaseInFlightRetries) {
          // The release that rang may not have committed yet: try again soon.
          ring_delay = std::chrono::milliseconds(1 << rang->second.free_seen);
          ++rang->second.free_seen;
          ring_now = true;
          return false;
        }
        after_ring_.erase(rang);
      }
      auto [it, first] = silent_.emplace(name, true);
      ring_now = first;  // once: the row may have been freed just before we looked
      if (!hooks_.waited(name)) silent_.erase(it);
      return false;
    }
    case LockTable::Ring::kReleased:
      // The hold ended (committed) before we looked: the waiter tries now.
      silent_.erase(name);
      after_ring_.erase(name);
      ring_now = true;
      return false;
    case LockTable::Ring::kTimedOut:
      silent_.erase(name);
      after_ring_.erase(name);
      return !slot.cancelled && hooks_.waited(name);
    case LockTable::Ring::kInterrupted:
      return !slot.cancelled && hooks_.waited(name);
  }
  return false;
}

}  // namespace dlock::details
