// Client's semaphore half: permits are acquired by the same engine and
// drivers as lock holds (attempt_step dispatches here), released by their
// Permit, renewed by the watchdog, and polled for by waiters.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <stdexcept>
#include <unordered_set>

#include "api/validation.hpp"
#include "core/client.hpp"
#include "core/log_format.hpp"
#include "core/thread_identity.hpp"
#include "wakeup/doorbell.hpp"

namespace dlock::details {

namespace {

using Clock = std::chrono::steady_clock;
using Micros = std::chrono::microseconds;

constexpr std::uint32_t kMaxPermits = 100'000;
constexpr int kDuplicateKey = 1062;
// Rounds of take/add when other clients keep adding the same slot first, or
// a connection keeps dying mid-statement; then the attempt counts as refused.
constexpr int kMaxTakeRounds = 4;

std::int64_t micros(Millis d) { return std::chrono::duration_cast<Micros>(d).count(); }

}  // namespace

void Client::validate_semaphore(std::uint32_t permits) const {
  if (permits == 0 || permits > kMaxPermits) {
    throw std::invalid_argument("dlock: a semaphore's permits must be 1.." + std::to_string(kMaxPermits) + ", not " +
                                std::to_string(permits));
  }
  if (!semaphores_) SemaphoreTable::name_for(options_.table);  // throws, naming the table
}

AcquireRequest Client::make_permit_request(std::string_view name, std::uint32_t permits, std::optional<Millis> lease,
                                           std::optional<Millis> wait) {
  validate_semaphore(permits);
  AcquireRequest r = make_request(name, 0, lease, wait);
  r.permits = permits;
  r.waiter_key = semaphore_key(name);
  return r;
}

const SemaphoreTable& Client::semaphore_table() {
  if (!semaphores_) SemaphoreTable::name_for(options_.table);  // throws std::invalid_argument
  // Checked without the mutex first: every permit acquire comes here.
  if (semaphore_table_ready_.load(std::memory_order_acquire)) return *semaphores_;
  std::lock_guard<std::mutex> guard(semaphore_table_mutex_);
  if (!semaphore_table_ready_.load(std::memory_order_relaxed)) {
    // Made on first use: a client that never uses a semaphore adds nothing
    // to the database, and one that does pays one statement once.
    CallBudget budget(options_.io_timeout);
    with_connection([&](Connection& c) {
      if (options_.create_table) {
        semaphores_->create_table(c);
      } else {
        semaphores_->check_schema(c);
      }
      return 0;
    });
    semaphore_table_ready_.store(true, std::memory_order_release);
  }
  return *semaphores_;
}

std::string Client::hold_bell_key(char kind, std::string_view name, std::uint64_t id) {
  static const char* const kHex = "0123456789abcdef";
  std::string key(1, '\0');
  key.push_back(kind);
  for (int shift = 60; shift >= 0; shift -= 4) key.push_back(kHex[(id >> shift) & 0xf]);
  key.append(name.data(), name.size());
  return key;
}

std::string Client::waiter_key_of_bell(const std::string& key) {
  if (key.size() >= 18 && key[0] == '\0' && key[1] == 'p') return semaphore_key(std::string_view(key).substr(18));
  if (key.size() >= 18 && key[0] == '\0' && key[1] == 'q')
    return rw_key(LockSide::kWrite, std::string_view(key).substr(18));
  return key;
}

void Client::drop_bell_when_idle(std::string bell, std::uint64_t session) {
  pool_.run_when_idle(session, [this, bell = std::move(bell)](Connection& c) {
    try {
      table_.drop_doorbell(c, bell);
    } catch (const BackendError& e) {
      // Not worth failing anyone: the doorbell goes when its session ends.
      logger_->debug("dlock: could not give back doorbell {}: {}", bell, e.what());
    }
  });
}

void Client::forget_permit_bell(const HeldPermit& permit, std::uint64_t id) {
  // While a lost permit's session keeps the doorbell, waiters elsewhere
  // would wait on a release that never comes: give it back now.
  if (permit.doorbell_session != 0)
    drop_bell_when_idle(doorbell_name(options_.database, options_.table, permit_bell_key(permit.name, id)),
                        permit.doorbell_session);
}

void Client::arm_hold_bells(char kind, const std::string& name, const std::vector<std::uint64_t>& ids) {
  if (!doorbells_) return;
  std::vector<std::string> keys;
  for (auto id : ids) keys.push_back(hold_bell_key(kind, name, id));
  std::vector<std::string> stale;
  {
    std::lock_guard<std::mutex> guard(hold_bells_mutex_);
    const std::string watched_key = kind + name;
    auto& watched = hold_bells_[watched_key];
    for (const auto& k : watched)
      if (std::find(keys.begin(), keys.end(), k) == keys.end()) stale.push_back(k);
    watched = keys;
    if (watched.empty()) hold_bells_.erase(watched_key);
  }
  for (const auto& k : stale) doorbells_->disarm(k);
  for (const auto& k : keys) doorbells_->arm(k);
}

AcquireStep Client::attempt_permit_step(const AcquireRequest& r) {
  const SemaphoreTable& table = semaphore_table();
  if (!r.single_attempt) {
    // A chain of permit handoffs to this client's waiters just ended: hold
    // back (no SQL), so a waiter in another client gets the freed slot.
    if (const Micros left = yields_.left(r.waiter_key); left > Micros::zero()) return wait_step(r, left.count());
  }
  CallBudget budget(options_.io_timeout);
  const PermitHolder holder{machine_id_, new_hold_id(), host_, pid_};
  const auto sent = Clock::now();
  std::uint64_t doorbell_session = 0;
  if (take_permit(r.name, r.permits, holder, micros(r.lease), r.watchdog, doorbell_session)) {
    HeldPermit held{r.name, r.watchdog, false, sent + r.lease, doorbell_session};
    held.permits = r.permits;
    permits_.add(holder.hold_id, std::move(held));
    if (logger_->should_log(spdlog::level::debug))
      logger_->debug("dlock: permit of semaphore {} acquired by {} ({})", printable(r.name), machine_id_,
                     r.watchdog ? "watchdog" : "fixed lease");
    AcquireStep step;
    step.next = AcquireStep::Next::kAcquired;
    step.permit = holder.hold_id;
    return step;
  }
  if (r.single_attempt) return AcquireStep{};  // kGaveUp
  // Every permit is held: wait for the first lease to end (or a wake).
  SemaphoreUse use;
  try {
    use = with_connection([&](Connection& c) { return table.use(c, r.name); });
  } catch (const OutcomeUnknown&) {
    PooledConnection fresh = pool_.acquire_fresh();  // a read: safe to repeat
    use = table.use(*fresh, r.name);
  }
  // Fewer live permits than the bound: one was freed since the take; retry
  // at once (in a millisecond).
  const std::int64_t ttl_us = use.live < r.permits ? 0 : use.next_expiry_us.value_or(0);
  if (doorbells_ && use.live >= r.permits) {
    // Permits of this client wake its waiters themselves when released;
    // the doorbells are for the others' (the first few to expire).
    std::vector<std::uint64_t> foreign;
    for (auto id : use.first_ids)
      if (!permits_.contains(id)) foreign.push_back(id);
    arm_hold_bells('p', r.name, foreign);
  }
  return wait_step(r, ttl_us);
}

bool Client::take_permit(std::string_view name, std::uint32_t permits, const PermitHolder& holder,
                         std::int64_t lease_us, bool watchdog, std::uint64_t& doorbell_session) {
  const SemaphoreTable& table = *semaphores_;
  const std::string bell =
      options_.fast_wakeup ? doorbell_name(options_.database, options_.table, permit_bell_key(name, holder.hold_id))
                           : std::string();
  const std::string* bell_ptr = options_.fast_wakeup ? &bell : nullptr;
  // Set when the last round ended without knowing whether the take ran: if
  // the rounds run out then, that is a database failure, not a refusal
  // (try_acquire throws rather than coming back empty).
  std::optional<BackendError> unknown;
  for (int round = 0; round < kMaxTakeRounds; ++round) {
    doorbell_session = 0;
    unknown.reset();
    try {
      const auto grow = with_connection([&](Connection& c) {
        if (table.take(c, name, permits, holder, lease_us, watchdog, bell_ptr)) {
          if (bell_ptr != nullptr) doorbell_session = c.session_key();
          return SemaphoreTable::Grow::kGrown;
        }
        const auto grown = table.grow(c, name, permits, holder, lease_us, watchdog);
        // A new slot's statement takes no doorbell: take it now (once per
        // slot ever added).
        if (grown == SemaphoreTable::Grow::kGrown && bell_ptr != nullptr) {
          try {
            if (table_.take_doorbell(c, bell)) doorbell_session = c.session_key();
          } catch (const BackendError&) {
            // The permit is held; it just has no doorbell (waiters poll).
          }
        }
        return grown;
      });
      if (grow == SemaphoreTable::Grow::kGrown) return true;
      if (grow == SemaphoreTable::Grow::kFull) return false;
      // kRaced: another client added that slot; take again.
    } catch (const OutcomeUnknown& e) {
      // The statement may or may not have run: the permit's id says. If it
      // did not (yet), running it again is safe: the id is unique, so a
      // late first run and the re-run cannot both take a slot (the second
      // fails with a duplicate key, handled below).
      logger_->warn("dlock: permit of semaphore {}: {}; reading whether it was taken", printable(name), e.what());
      PooledConnection fresh = pool_.acquire_fresh();
      if (table.read_permit(*fresh, holder.hold_id)) return true;
      unknown.emplace(e);
    } catch (const BackendError& e) {
      if (e.code() != kDuplicateKey) throw;
      // The id is already in a row: an earlier run of this very take landed.
      PooledConnection fresh = pool_.acquire_fresh();
      if (table.read_permit(*fresh, holder.hold_id)) return true;
    }
  }
  if (unknown) throw *unknown;
  return false;
}

void Client::release_permit(std::string_view name, std::uint64_t id) noexcept {
  try {
    // A local waiter claimed for a handoff: told once the release is done,
    // whatever its outcome (see Client::release).
    WaiterRegistry::ClaimedWaiter claim;
    const auto held = permits_.remove(id);
    if (!held) return;  // released before
    if (held->lost) {
      // Reported when it was found lost.
      logger_->debug("dlock: released permit of semaphore {} had been lost", printable(name));
      return;
    }
    const std::string key = semaphore_key(name);
    bool released = false;
    try {
      CallBudget budget(options_.io_timeout);
      claim_for_handoff(key, held->chain_started, claim);
      if (claim.waiter) {
        switch (hand_over_permit(name, id, *held, claim.waiter)) {
          case Handoff::kHanded:
            claim.grant(id);  // it holds the permit, under the same id
            return;
          case Handoff::kLost:
            report_lost_permit(name, "its lease ran out or it was force-released");
            return;  // the claim's wake lets the waiter try a slot
          case Handoff::kDeclined:
            break;
        }
      }
      try {
        // The doorbell belongs to the session that took it: free the slot
        // there and ring in the same statement (see release_ringing).
        const std::string bell = held->doorbell_session != 0
                                     ? doorbell_name(options_.database, options_.table, permit_bell_key(name, id))
                                     : std::string();
        released = release_ringing(held->doorbell_session, bell, [&](Connection& c, const std::string* b) {
          return semaphores_->release(c, id, b);
        });
      } catch (const OutcomeUnknown&) {
        // Still live: the release did not land; run it once more. Gone:
        // it landed (or the lease had ended, which changes nothing now).
        PooledConnection fresh = pool_.acquire_fresh();
        released = !semaphores_->read_permit(*fresh, id) || semaphores_->release(*fresh, id);
      }
      if (!released) report_lost_permit(name, "its lease ran out or it was force-released");
    } catch (const std::exception& e) {
      logger_->warn("dlock: could not release a permit of semaphore {}; it is freed when its lease ends: {}",
                    printable(name), e.what());
    }
    // A local waiter may take the freed slot now (a claimed one is woken
    // by the claim's resolution).
    if (!claim.waiter) waiters_.wake_one(key);
  } catch (...) {
    // Logging or allocation failed: the lease will end.
  }
}

Client::Handoff Client::hand_over_permit(std::string_view name, std::uint64_t id, const HeldPermit& held,
                                         const std::shared_ptr<WaiterRegistry::Parked>& claimed) {
  // The request stays valid until the claim is resolved: its waiter waits.
  const AcquireRequest* request = claimed->handoff_request();
  if (request == nullptr || request->permits == 0) return Handoff::kDeclined;  // interrupted since
  const auto now = Clock::now();
  if (!request->forever && now >= request->deadline) return Handoff::kDeclined;
  // The slot is below the bound the permit was taken under; a waiter with
  // a lower bound might not fit in it.
  if (request->permits < held.permits) return Handoff::kDeclined;
  // The lease may have run out (the watchdog could not renew): let the
  // release find out, rather than hand over what may be gone.
  if (held.deadline <= now) return Handoff::kDeclined;

  const std::int64_t lease_us = micros(request->lease);
  const auto run = [&](Connection& c) {
    return semaphores_->hand_over(c, id, request->permits, lease_us, request->watchdog);
  };
  auto sent = now;
  bool handed = false;
  try {
    try {
      handed = with_connection(run);
    } catch (const OutcomeUnknown& e) {
      // The permit keeps its id, so the row cannot tell whether the handoff
      // landed; but while the id is live the permit is this client's either
      // way, and running the statement again only restarts the new lease
      // once more (and bumps the fence once more). Not live: it was lost.
      logger_->warn("dlock: permit of semaphore {}: {}; reading whether it is still held", printable(name), e.what());
      PooledConnection fresh = pool_.acquire_fresh();
      sent = Clock::now();
      handed = semaphores_->read_permit(*fresh, id) && run(*fresh);
    }
  } catch (const BackendError&) {
    // The permit stays in its slot until its lease ends (as after a failed
    // release); its doorbell must not stay with it.
    forget_permit_bell(held, id);
    throw;
  }
  if (!handed) {
    forget_permit_bell(held, id);
    return Handoff::kLost;
  }
  HeldPermit next{held.name, request->watchdog, false, sent + request->lease, held.doorbell_session};
  next.permits = request->permits;
  next.chain_started = held.chain_started == SteadyTime{} ? sent : held.chain_started;
  permits_.add(id, std::move(next));
  handoffs_.fetch_add(1, std::memory_order_relaxed);
  if (logger_->should_log(spdlog::level::debug))
    logger_->debug("dlock: permit of semaphore {} handed over by {} to a waiter here", printable(name), machine_id_);
  return Handoff::kHanded;
}

void Client::report_lost_permit(std::string_view name, const char* why) {
  logger_->warn("dlock: permit of semaphore {} lost: {}", printable(name), why);
  notify_lost(name, 0);
}

std::uint32_t Client::live_permits(std::string_view name) {
  validate_name(name);
  const SemaphoreTable& table = semaphore_table();
  CallBudget budget(options_.io_timeout);
  try {
    return with_connection([&](Connection& c) { return table.use(c, name).live; });
  } catch (const OutcomeUnknown&) {
    PooledConnection fresh = pool_.acquire_fresh();
    return table.use(*fresh, name).live;
  }
}

std::size_t Client::force_release_semaphore(std::string_view name) {
  validate_name(name);
  const SemaphoreTable& table = semaphore_table();
  CallBudget budget(options_.io_timeout);
  const auto freed = with_connection([&](Connection& c) { return table.force_release(c, name); });
  if (freed > 0) logger_->info("dlock: force-release of semaphore {} by {}: freed {} permit(s)", printable(name),
                               machine_id_, freed);
  waiters_.wake_all(semaphore_key(name));
  return freed;
}

std::optional<PermitRow> Client::permit_row(std::uint64_t id) {
  const SemaphoreTable& table = semaphore_table();
  CallBudget budget(options_.io_timeout);
  try {
    return with_connection([&](Connection& c) { return table.read_permit(c, id); });
  } catch (const OutcomeUnknown&) {
    PooledConnection fresh = pool_.acquire_fresh();
    return table.read_permit(*fresh, id);
  }
}

std::vector<PermitRow> Client::held_permits() {
  const SemaphoreTable& table = semaphore_table();
  CallBudget budget(options_.io_timeout);
  return with_connection([&](Connection& c) { return table.read_held(c); });
}

void Client::renew_permits_tick(const IoThread::ConnectionSource& connection) {
  const auto refs = permits_.watchdog_permits();
  if (refs.empty()) return;
  CallBudget budget(std::min(options_.io_timeout, renew_period()));
  const auto now = Clock::now();
  std::vector<WatchedPermit> renewing;  // as the snapshot saw them
  std::vector<std::uint64_t> ids;
  for (const auto& seen : refs) {
    if (seen.deadline > now) {
      renewing.push_back(seen);
      ids.push_back(seen.id);
    } else if (auto was = permits_.mark_lost(seen.id, seen.generation)) {
      forget_permit_bell(*was, seen.id);
      report_lost_permit(was->name, "renewal failed past the lease");
    }
  }
  if (ids.empty()) return;
  const std::int64_t lease_us = micros(options_.watchdog_timeout);
  auto sent = Clock::now();
  std::size_t renewed = 0;
  try {
    renewed = semaphores_->renew(connection(), ids, lease_us);
  } catch (const OutcomeUnknown&) {
    // Extends only live permits of this client: safe to run again.
    sent = Clock::now();
    renewed = semaphores_->renew(connection(), ids, lease_us);
  }
  if (renewed == ids.size()) {
    permits_.extend(ids, sent + options_.watchdog_timeout);
    return;
  }
  // Fewer rows than permits: the ones no longer live were lost (the others
  // were renewed by the statement above).
  const auto live = semaphores_->live_among(connection(), ids);
  permits_.extend(live, sent + options_.watchdog_timeout);
  const std::unordered_set<std::uint64_t> live_set(live.begin(), live.end());
  for (const auto& seen : renewing) {
    if (live_set.count(seen.id) != 0) continue;
    if (auto was = permits_.mark_lost(seen.id, seen.generation)) {
      forget_permit_bell(*was, seen.id);
      report_lost_permit(was->name, "the watchdog found it expired or force-released");
    }
  }
}

void Client::poll_semaphores_tick(const IoThread::ConnectionSource& connection) {
  std::vector<std::string> names;
  for (const auto& key : waiters_.names())
    if (is_semaphore_key(key)) names.push_back(key.substr(2));
  if (names.empty() || !semaphores_) return;
  CallBudget budget(options_.io_timeout);
  std::vector<SemaphoreUse> uses;
  try {
    uses = semaphores_->use_many(connection(), names);
  } catch (const OutcomeUnknown&) {
    uses = semaphores_->use_many(connection(), names);  // a read: safe to repeat
  }
  for (const auto& use : uses) {
    std::uint32_t bound = 0;
    {
      std::lock_guard<std::mutex> guard(semaphore_bounds_mutex_);
      auto it = semaphore_bounds_.find(use.name);
      if (it != semaphore_bounds_.end()) bound = it->second;
    }
    if (use.live < bound) waiters_.wake_one(semaphore_key(use.name));
  }
}

}  // namespace dlock::details
