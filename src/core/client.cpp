#include "core/client.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <unistd.h>

#include <algorithm>
#include <set>
#include <thread>
#include <unordered_map>

#include "core/log_format.hpp"
#include "core/thread_identity.hpp"
#include "api/validation.hpp"

namespace dlock::details {

namespace {

using Clock = std::chrono::steady_clock;
using Micros = std::chrono::microseconds;

std::int64_t micros(Millis d) { return std::chrono::duration_cast<Micros>(d).count(); }

const Options& validated(const Options& options) {
  validate_options(options);
  return options;
}

// The io thread's connection waits at most a second for a row lock: a row
// locked by a foreign transaction must not stall the watchdog's renewal of
// every other hold (it then renews around it, see renew_tick).
ConnectionSettings io_settings(const ConnectionSettings& settings) {
  ConnectionSettings s = settings;
  s.lock_wait_seconds = 1;
  return s;
}

// A wait longer than this (about a century) means "forever": it cannot be
// added to a steady_clock time without overflow, and nobody means it.
constexpr Millis kForever = std::chrono::hours(24 * 365 * 100);

std::shared_ptr<spdlog::logger> choose_logger(const Options& options) {
  if (options.logger) return options.logger;
  static std::mutex mutex;
  std::lock_guard<std::mutex> guard(mutex);
  if (auto existing = spdlog::get("dlock")) return existing;
  return spdlog::stderr_color_mt("dlock");
}

// False while a WarmestConnection exists on this thread.
thread_local bool t_thread_affinity = true;

}  // namespace

Client::WarmestConnection::WarmestConnection() : previous_(t_thread_affinity) { t_thread_affinity = false; }
Client::WarmestConnection::~WarmestConnection() { t_thread_affinity = previous_; }

PooledConnection Client::pooled_connection() {
  // Each thread prefers the connection it used last. A hold's doorbell lives
  // on the session that acquired it, and the same thread usually unlocks: so
  // the unlock finds that session idle and can ring in its own statement.
  // A worker running asynchronous steps takes the warmest idle connection
  // instead (see WarmestConnection).
  thread_local const ConnectionPool* last_pool = nullptr;
  thread_local std::uint64_t last_session = 0;
  PooledConnection connection = pool_.acquire(t_thread_affinity && last_pool == &pool_ ? last_session : 0);
  last_pool = &pool_;
  last_session = connection->session_key();
  return connection;
}

LockRow Client::read_row(std::string_view name) {
  try {
    return with_connection([&](Connection& c) { return table_.read(c, name); });
  } catch (const OutcomeUnknown&) {
    return read_on_fresh_connection(name);
  }
}

LockRow Client::read_on_fresh_connection(std::string_view name) {
  PooledConnection fresh = pool_.acquire_fresh();
  return table_.read(*fresh, name);
}

Client::Client(Options options)
    : options_(validated(options)),
      logger_(choose_logger(options_)),
      machine_id_(options_.machine_id.empty() ? generate_machine_id() : options_.machine_id),
      pid_(static_cast<std::uint32_t>(::getpid())),
      table_(options_.table, logger_),
      settings_(ConnectionSettings::from(options_)),
      pool_(settings_, options_.pool_size),
      semaphores_(SemaphoreTable::name_for_fits(options_.table)
                      ? std::make_unique<const SemaphoreTable>(options_.table, logger_)
                      : nullptr),
      rw_(RwTable::names_fit(options_.table) ? std::make_unique<const RwTable>(options_.table, logger_) : nullptr),
      client_key_(new_hold_id()),
      hold_tag_(new_hold_id() >> 48),
      io_(io_settings(settings_), logger_),
      async_(options_.pool_size) {
  if (settings_.servers) {
    // Every waiter retries at once on the new server: its doorbell
    // connection and the poller's may still be stuck on the old one.
    settings_.servers->on_move([this](const ServerChoice::Server& from, const ServerChoice::Server& to) {
      logger_->warn("dlock: client {}: cannot connect to {}:{}; moving to {}:{} (it stays there until that fails)",
                    machine_id_, from.host, from.port, to.host, to.port);
      for (const auto& name : waiters_.names()) waiters_.wake_all(name);
    });
  }
  // Connecting here makes an unreachable database fail at construction.
  with_connection([&](Connection& c) {
    if (options_.create_table) {
      table_.create_table(c);
    } else {
      table_.check_schema(c);
    }
    return 0;
  });
  io_.every(renew_period(), "renewing leases",
            [this](const IoThread::ConnectionSource& c) { renew_tick(c); });
  io_.every(options_.poll_interval, "polling waited-for locks",
            [this](const IoThread::ConnectionSource& c) { poll_tick(c); });
  io_.every(renew_period(), "renewing semaphore permits",
            [this](const IoThread::ConnectionSource& c) { renew_permits_tick(c); });
  io_.every(options_.poll_interval, "polling waited-for semaphores",
            [this](const IoThread::ConnectionSource& c) { poll_semaphores_tick(c); });
  io_.every(renew_period(), "renewing read-write locks",
            [this](const IoThread::ConnectionSource& c) { renew_rw_tick(c); });
  io_.every(options_.poll_interval, "polling waited-for read-write locks",
            [this](const IoThread::ConnectionSource& c) { poll_rw_tick(c); });
  if (options_.fast_wakeup) {
    // One GET_LOCK wait must end before the connection's read timeout.
    const auto io_seconds = (options_.io_timeout.count() + 999) / 1000;
    const int wait_seconds = static_cast<int>(std::min<std::int64_t>(10, io_seconds - 1));
    if (wait_seconds >= 1) {
      DoorbellWatcher::Hooks hooks;
      hooks.ring = [this](const std::string& key) {
        const std::string waiter = waiter_key_of_bell(key);
        // A write side's release lets every reader in, and one writer; a
        // read release wakes a writer, and readers held back by a waiting
        // writer (which watch the same doorbells) look again.
        if (is_rw_key(waiter) && waiter[1] == 'w') waiters_.wake_all(rw_key(LockSide::kRead, waiter.substr(2)));
        waiters_.wake_one(waiter);
      };
      hooks.waited = [this](const std::string& key) {
        const std::string waiter = waiter_key_of_bell(key);
        if (is_rw_key(waiter) && waiter[1] == 'w' && waiters_.has(rw_key(LockSide::kRead, waiter.substr(2))))
          return true;
        return waiters_.has(waiter);
      };
      hooks.interrupt = [this](SessionAddress session, std::function<bool()> still_waiting) {
        io_.post("interrupting a doorbell wait",
                 [session, still_waiting = std::move(still_waiting)](const IoThread::ConnectionSource& connection) {
                   // Checked again here, on the io thread, right before the
                   // KILL: the wait may have ended since it was asked for.
                   if (still_waiting()) interrupt_doorbell_wait(connection(), session);
                 });
      };
      hooks.ours = [this](std::uint64_t hold_id) { return is_this_clients(hold_id); };
      doorbells_ = std::make_unique<DoorbellWatcher>(settings_, table_, options_.database,
                                                     options_.wakeup_connections, wait_seconds, logger_,
                                                     std::move(hooks));
    } else {
      logger_->info("dlock: fast_wakeup needs io_timeout >= 2 s (a doorbell wait must end before the read "
                    "timeout); waiters in this client rely on polling");
    }
  }
  io_.start();
  logger_->debug("dlock: client {} connected to {}/{} table {}", machine_id_,
                 settings_.servers ? settings_.servers->describe() : options_.host + ":" + std::to_string(options_.port),
                 options_.database, options_.table);
}

Client::~Client() {
  closing_ = true;  // no on_lock_lost from here on (report_lost checks it)
  // Pending asynchronous waits end with Cancelled; running statements
  // finish; then the workers stop.
  async_.shutdown();
  doorbells_.reset();
  io_.stop();
  const auto holds = holds_.live();
  if (!holds.empty()) {
    try {
      CallBudget budget(options_.io_timeout);
      const auto released = with_connection([&](Connection& c) { return table_.release_all(c, holds); });
      logger_->debug("dlock: client {} released {} hold(s) at shutdown", machine_id_, released);
    } catch (const std::exception& e) {
      logger_->warn("dlock: client {} could not release {} hold(s) at shutdown; they expire with their leases: {}",
                    machine_id_, holds.size(), e.what());
    }
  }
  release_rw_at_shutdown();
  const auto permits = permits_.live_ids();
  if (!permits.empty() && semaphores_) {
    try {
      CallBudget budget(options_.io_timeout);
      const auto released = with_connection([&](Connection& c) { return semaphores_->release_all(c, permits); });
      logger_->debug("dlock: client {} released {} permit(s) at shutdown", machine_id_, released);
    } catch (const std::exception& e) {
      logger_->warn("dlock: client {} could not release {} permit(s) at shutdown; they expire with their leases: {}",
                    machine_id_, permits.size(), e.what());
    }
  }  // The move hook uses members destroyed before settings_ (waiters_).
  if (settings_.servers) settings_.servers->on_move(nullptr);
}

// ---------------------------------------------------------------- acquire

Millis Client::renew_period() const { return std::max(Millis(1), options_.watchdog_timeout / 3); }

std::mutex& Client::owner_mutex(std::string_view name, std::uint64_t owner) {
  const std::size_t h = std::hash<std::string_view>{}(name) ^ (owner * 0x9e3779b97f4a7c15ULL);
  return owner_mutexes_[h % owner_mutexes_.size()];
}

AcquireRequest Client::make_request(std::string_view name, std::uint64_t owner, std::optional<Millis> lease,
                                    std::optional<Millis> wait, LockSide side) const {
  validate_name(name);
  if (lease) validate_lease(*lease);
  AcquireRequest r;
  r.name = std::string(name);
  r.side = side;
  if (side == LockSide::kMutex) {
    r.waiter_key = r.name;
  } else {
    validate_rw();
    r.waiter_key = rw_key(side, name);
    if (side == LockSide::kWrite && !rw_holds_.find(r.waiter_key, owner) &&
        rw_holds_.find(rw_key(LockSide::kRead, name), owner)) {
      throw std::logic_error("dlock: the owner holds only the read side of read-write lock \"" + printable(name) +
                             "\" and asks for the write side: upgrading is not supported (two readers upgrading "
                             "at once would wait for each other forever); release the read side first");
    }
  }
  r.owner = owner;
  r.watchdog = !lease.has_value();
  r.lease = lease.value_or(options_.watchdog_timeout);
  r.forever = !wait.has_value() || *wait >= kForever;
  r.single_attempt = !r.forever && *wait <= Millis::zero();
  if (!r.forever) r.deadline = Clock::now() + *wait;
  return r;
}

AcquireStep Client::attempt_step(const AcquireRequest& r) {
  if (r.permits != 0) return attempt_permit_step(r);
  if (r.side != LockSide::kMutex) return attempt_rw_step(r);
  AcquireStep step;
  const Attempt a = attempt(r.name, r.owner, r.lease, r.watchdog, !r.single_attempt);
  if (a.acquired) {
    step.next = AcquireStep::Next::kAcquired;
    return step;
  }
  if (r.single_attempt) return step;  // kGaveUp
  // A holder in this client wakes us itself when it unlocks; the doorbell
  // is for holders elsewhere. A row already free again needs no doorbell:
  // the retry comes in a millisecond.
  if (doorbells_ && a.held && !a.holder_is_local) doorbells_->arm(r.name);
  return wait_step(r, a.ttl_us.value_or(0));
}

AcquireStep Client::wait_step(const AcquireRequest& r, std::int64_t ttl_us) {
  AcquireStep step;  // kGaveUp
  // One millisecond past the holder's expiry, so the retry finds it expired.
  Micros wait = Micros(std::max<std::int64_t>(0, ttl_us) + 1000);
  if (!r.forever) {
    const auto left = std::chrono::duration_cast<Micros>(r.deadline - Clock::now());
    if (left <= Micros::zero()) return step;
    wait = std::min(wait, left);
  }
  step.next = AcquireStep::Next::kWait;
  step.wait = wait;
  return step;
}

void Client::waiting_started(const AcquireRequest& request) {
  if (request.permits == 0) return;
  std::lock_guard<std::mutex> guard(semaphore_bounds_mutex_);
  semaphore_bounds_[request.name] = request.permits;
}

std::size_t Client::semaphore_bounds_known() {
  std::lock_guard<std::mutex> guard(semaphore_bounds_mutex_);
  return semaphore_bounds_.size();
}

void Client::waiting_ended(const std::string& key) {
  if (waiters_.has(key)) return;
  if (is_semaphore_key(key)) {
    {
      // Checked again under the mutex: a waiter that subscribed since
      // notes its bound under it, after subscribing.
      std::lock_guard<std::mutex> guard(semaphore_bounds_mutex_);
      if (waiters_.has(key)) return;
      semaphore_bounds_.erase(key.substr(2));
    }
    if (doorbells_) arm_hold_bells('p', key.substr(2), {});  // stops watching its permits' doorbells
    return;
  }
  if (is_rw_key(key)) {
    const std::string name = key.substr(2);
    if (key[1] == 'w') unmark_intent(name);  // readers are no longer held back by this client's writers
    if (!waiters_.has(rw_key(LockSide::kRead, name)) && !waiters_.has(rw_key(LockSide::kWrite, name))) {
      arm_hold_bells('q', name, {});  // stops watching readers' doorbells
      if (doorbells_) doorbells_->disarm(rw_key(LockSide::kWrite, name));
    }
    return;
  }
  if (doorbells_) doorbells_->disarm(key);
}

bool Client::acquire(std::string_view name, std::uint64_t owner, std::optional<Millis> lease,
                     std::optional<Millis> wait, const std::atomic<bool>* interrupted, LockSide side) {
  return drive(make_request(name, owner, lease, wait, side), interrupted).next == AcquireStep::Next::kAcquired;
}

AcquireStep Client::drive(const AcquireRequest& request, const std::atomic<bool>* interrupted) {
  if (request.single_attempt) return attempt_step(request);
  if (interrupted != nullptr && interrupted->load()) return AcquireStep{};
  // The first attempt runs unsubscribed, so an uncontended lock (the usual
  // case) never touches the waiter registry. A wake that lands between its
  // refusal and the subscription would be lost, but it shows as a change
  // of the registry's wake count: then the next attempt comes at once.
  const std::uint64_t wakes_before = waiters_.wakes();
  AcquireStep step = attempt_step(request);
  if (step.next == AcquireStep::Next::kAcquired) return step;
  struct WaitingEnded {
    Client& client;
    const std::string& key;
    ~WaitingEnded() { client.waiting_ended(key); }
  } waiting_ended{*this, request.waiter_key};  // also disarms what a refused attempt armed
  if (step.next != AcquireStep::Next::kWait) return step;
  if (refused_before_subscribing) refused_before_subscribing();
  // From here on, a release that lands between a refused attempt and the
  // wait leaves a permit, so no wake is lost.
  WaiterRegistry::Subscription subscription(waiters_, request.waiter_key);
  waiting_started(request);
  bool try_now = waiters_.wakes() != wakes_before;
  const bool claimable = request.accepts_handoff();
  for (;;) {
    if (try_now) {
      try_now = false;
      if (interrupted != nullptr && interrupted->load()) return AcquireStep{};
      step = attempt_step(request);
      if (step.next != AcquireStep::Next::kWait) return step;
    }
    try_now = true;
    std::uint64_t grant = 0;
    if (!claimable) {
      subscription.wait_for(step.wait);
    } else if (subscription.wait_claimable(step.wait, &request, interrupted, &grant) ==
               WaiterRegistry::Subscription::Woken::kGranted) {
      step.next = AcquireStep::Next::kAcquired;
      if (request.permits != 0) step.permit = grant;  // the permit's id
      return step;
    }
  }
}

void Client::throw_lost(std::string_view name, std::uint64_t fence) const {
  throw LockLostError("dlock: the hold on \"" + printable(name) + "\" (fence " + std::to_string(fence) +
                      ") was lost (its lease ran out, it was taken over or force-unlocked) while its owner still "
                      "owes unlock() for it; make those unlock() calls before acquiring it again");
}

Client::Attempt Client::attempt(std::string_view name, std::uint64_t owner, Millis lease, bool watchdog,
                                bool want_ttl) {
  std::lock_guard<std::mutex> serial(owner_mutex(name, owner));
  CallBudget budget(options_.io_timeout);
  const std::int64_t lease_us = micros(lease);
  const HoldRegistry::NameView here = holds_.view(name, owner);
  if (const auto& local = here.own) {
    // Reentrant: only the live hold itself, never a new one in its place.
    if (local->lost) throw_lost(name, local->fence);
    const unsigned next = local->count + 1;
    const auto sent = Clock::now();
    if (!reacquire_reconciled(name, local->hold_id, next, lease_us, watchdog)) {
      note_lost(name, owner, local->generation, "its lease ran out or it was force-unlocked");
      throw_lost(name, local->fence);
    }
    if (!holds_.record_reentrant(name, owner, local->generation, next, watchdog, sent + lease)) {
      // The watchdog found the hold lost while the statement ran (its local
      // lease had run out). A lost hold stays lost: the caller has been
      // told, so free the row rather than leave it held for nobody.
      free_quietly(name, local->hold_id);
      throw_lost(name, local->fence);
    }
    if (logger_->should_log(spdlog::level::debug))
      logger_->debug("dlock: {} re-acquired by {}/{} (count {})", printable(name), machine_id_, owner, next);
    return {true, std::nullopt};
  }
  if (want_ttl) {
    // A chain of handoffs to local waiters just ended: hold back, so a
    // waiter in another client gets in (no SQL; the wait ends with it).
    if (const Micros left = yields_.left(name); left > Micros::zero()) {
      Attempt yielding;
      yielding.ttl_us = left.count();
      return yielding;
    }
    // Held by another owner of this client (the usual case on a hot lock):
    // refused without SQL, since its unlock wakes us or hands us the hold,
    // and its local lease deadline is never later than the server's
    // expiry. Unless something saw the row free meanwhile (the poller, a
    // force-unlock here): then the database decides.
    if (here.live_until && !free_hints_.take(name)) {
      Attempt refused;
      refused.held = true;
      refused.holder_is_local = true;
      refused.ttl_us = std::max<std::int64_t>(0, std::chrono::duration_cast<Micros>(*here.live_until - Clock::now()).count());
      return refused;
    }
  }
  const Holder holder{machine_id_, owner, tagged_hold_id(), host_, pid_};
  const auto sent = Clock::now();
  LockRow row;
  std::uint64_t fence = 0;
  std::uint64_t doorbell_session = 0;
  const AcquireResult result = acquire_fresh(name, holder, 1, lease_us, watchdog, row, fence, doorbell_session);
  if (result != AcquireResult::kRefused) {
    holds_.record_fresh(name, owner, holder.hold_id, 1, watchdog, sent + lease, fence, doorbell_session);
    if (logger_->should_log(spdlog::level::debug))
      logger_->debug("dlock: {} acquired by {}/{} ({})", printable(name), machine_id_, owner,
                     watchdog ? "watchdog" : "fixed lease");
    return {true, std::nullopt};
  }
  Attempt refused;
  if (want_ttl) {
    if (!row.exists) row = read_row(name);
    refused.ttl_us = row.held ? row.ttl_us.value_or(0) : 0;
    refused.held = row.held;
    refused.holder_is_local = row.held && is_this_clients(row.hold_id);
  }
  return refused;
}

AcquireResult Client::acquire_fresh(std::string_view name, const Holder& holder, unsigned state, std::int64_t lease_us,
                                    bool watchdog, LockRow& row, std::uint64_t& fence,
                                    std::uint64_t& doorbell_session) {
  const bool known = known_rows_.contains(name);
  const auto run = [&] {
    return with_connection([&](Connection& c) {
      // The row records this session's bell (taken on the session's first
      // take, one statement per session ever), so its waiters elsewhere can
      // block on it.
      const std::string* bell = options_.fast_wakeup ? table_.session_bell(c) : nullptr;
      AcquireResult r = AcquireResult::kRefused;
      if (known) {
        if (table_.take(c, name, holder, state, lease_us, watchdog, bell)) r = AcquireResult::kTaken;
      } else {
        r = table_.acquire(c, name, holder, state, lease_us, watchdog, bell);
      }
      doorbell_session = bell != nullptr && r != AcquireResult::kRefused ? c.session_key() : 0;
      return r;
    });
  };
  AcquireResult result;
  try {
    result = run();
  } catch (const OutcomeUnknown& e) {
    // The session died, and its bell went with it.
    doorbell_session = 0;
    row = read_after_unknown(name, e);
    if (row.held_by(holder.hold_id)) {
      fence = row.fence;
      if (!known) known_rows_.add(name);
      return AcquireResult::kTaken;
    }
    // It did not apply (yet). Running it again with the same hold id is
    // safe: a late first run leaves a row this statement takes again.
    result = run();
  }
  if (!known) {
    known_rows_.add(name);  // the upsert leaves a row either way
    if (result == AcquireResult::kInserted) fence = 1;
    return result;
  }
  if (result == AcquireResult::kRefused) {
    // Refused, or the row is gone (deleted behind our back): look.
    row = read_row(name);
    if (!row.exists) {
      known_rows_.forget(name);
      row = LockRow{};
      return acquire_fresh(name, holder, state, lease_us, watchdog, row, fence, doorbell_session);
    }
  }
  return result;
}

bool Client::reacquire_reconciled(std::string_view name, std::uint64_t hold_id, unsigned state,
                                  std::int64_t lease_us, bool watchdog) {
  const auto run = [&] {
    return with_connection(
        [&](Connection& c) { return table_.reacquire(c, name, hold_id, state, lease_us, watchdog); });
  };
  try {
    return run();
  } catch (const OutcomeUnknown& e) {
    const LockRow row = read_after_unknown(name, e);
    if (!row.held_by(hold_id)) return false;
    if (row.state == state) return true;
    return run();  // absolute count: a late first run writes the same values
  }
}

void Client::free_quietly(std::string_view name, std::uint64_t hold_id) {
  try {
    with_connection([&](Connection& c) { return table_.release(c, name, hold_id, 0); });
  } catch (const BackendError& e) {
    logger_->warn("dlock: could not free {} after finding its hold lost; it expires with its lease: {}",
                  printable(name), e.what());
  }
}

LockRow Client::read_after_unknown(std::string_view name, const OutcomeUnknown& cause) {
  logger_->warn("dlock: connection lost mid-statement on {}; reading the row to learn the outcome: {}",
                printable(name), cause.what());
  try {
    // Not on a pooled connection the same fault may have killed too.
    return read_on_fresh_connection(name);
  } catch (const BackendError& e) {
    throw BackendError(std::string("dlock: outcome unknown (") + cause.what() + "), and the row could not be read: " +
                           e.what(),
                       e.code() != 0 ? e.code() : cause.code(), e.code() != 0 ? e.sql_state() : cause.sql_state());
  }
}

// ---------------------------------------------------------------- release

void Client::release(std::string_view name, std::uint64_t owner, LockSide side) {
  if (side != LockSide::kMutex) return release_rw(name, owner, side);
  validate_name(name);
  // A local waiter claimed for a handoff: told once the release is done,
  // whatever its outcome, and after the owner's stripe is let go (the
  // waiter may resume on this very thread, see AsyncAcquire::wake). Granted:
  // it resumes holding the lock; else the claim's end is the release's wake
  // and it tries the row.
  WaiterRegistry::ClaimedWaiter claim;
  std::lock_guard<std::mutex> serial(owner_mutex(name, owner));
  const std::optional<Hold> before = holds_.take_one(name, owner);
  if (!before) {
    throw NotHeldError("dlock: unlock(\"" + printable(name) + "\") by an owner (" + std::to_string(owner) +
                       ") that holds no hold on it in this client");
  }
  if (before->lost) {
    logger_->debug("dlock: unlock of lost hold {} (count {} left)", printable(name), before->count - 1);
    return;
  }
  CallBudget budget(options_.io_timeout);
  const unsigned target = before->count - 1;
  const std::uint64_t hold_id = before->hold_id;
  if (target == 0) claim_for_handoff(name, before->chain_started, claim);
  bool released = false;
  try {
    if (claim.waiter) {
      switch (hand_over(name, owner, *before, claim.waiter)) {
        case Handoff::kHanded:
          claim.grant();  // it holds the lock
          return;
        case Handoff::kLost:
          return;  // the claim's wake lets the waiter try the row
        case Handoff::kDeclined:
          break;
      }
    }
    try {
      if (target == 0) {
        released = free_row(name, *before);
      } else {
        released = with_connection([&](Connection& c) { return table_.release(c, name, hold_id, target); });
      }
    } catch (const OutcomeUnknown& e) {
      const LockRow row = read_after_unknown(name, e);
      // Not held by this hold any more: our release applied (or the hold was
      // lost at the same moment; the row cannot tell which). Still ours
      // with the target count: it applied. Else it did not, and writing the
      // same count again is safe.
      released = !row.held_by(hold_id) || row.state == target ||
                 with_connection([&](Connection& c) { return table_.release(c, name, hold_id, target); });
    }
  } catch (const BackendError& e) {
    logger_->error("dlock: could not release {}; it stays locked until its lease expires: {}", printable(name),
                   e.what());
    return;
  }
  if (!released) {
    if (target == 0) {
      report_lost(name, before->fence, "found already lost at unlock");
      // A waiter refused here because this hold looked live asks again
      // (a claimed one is woken by the claim's resolution).
      if (!claim.waiter) waiters_.wake_one(name);
    } else {
      note_lost(name, owner, before->generation, "found already lost at unlock");
    }
    return;
  }
  if (logger_->should_log(spdlog::level::debug))
    logger_->debug("dlock: {} released by {}/{} (count {})", printable(name), machine_id_, owner, target);
  if (target != 0) return;
  if (!claim.waiter) waiters_.wake_one(name);  // else the claim's resolution is the wake
}

void Client::claim_for_handoff(std::string_view key, SteadyTime chain_started, WaiterRegistry::ClaimedWaiter& claim) {
  if (!handoffs_enabled_.load(std::memory_order_relaxed)) return;
  const Millis chain_bound(handoff_chain_ms_.load(std::memory_order_relaxed));
  if (chain_started == SteadyTime{} || Clock::now() - chain_started < chain_bound) {
    claim.waiter = waiters_.claim(key);
  } else if (waiters_.has(key)) {
    // Held back from now: the release rings the doorbell inside its
    // statement, before it returns, and a local waiter woken by that ring
    // must not beat the other client it rang for.
    yields_.mark(key, Clock::now() + kYieldAfterChain);
  }
}

Client::Handoff Client::hand_over(std::string_view name, std::uint64_t owner, const Hold& before,
                                  const std::shared_ptr<WaiterRegistry::Parked>& claimed) {
  // The request stays valid until the claim is resolved: its waiter waits.
  const AcquireRequest* request = claimed->handoff_request();
  if (request == nullptr || request->side != LockSide::kMutex) return Handoff::kDeclined;  // interrupted since
  if (!request->forever && Clock::now() >= request->deadline) return Handoff::kDeclined;
  // The new hold is the waiter's owner's: serialize with that owner's other
  // operations on the name (the caller holds `owner`'s stripe, which may be
  // the same one). Never wait for it: a busy owner just takes the row
  // the usual way.
  std::mutex& theirs = owner_mutex(name, request->owner);
  std::unique_lock<std::mutex> serial(theirs, std::defer_lock);
  if (&theirs != &owner_mutex(name, owner) && !serial.try_lock()) return Handoff::kDeclined;
  if (holds_.find(name, request->owner)) return Handoff::kDeclined;  // e.g. a lost hold it still owes unlock() for

  const std::uint64_t to = tagged_hold_id();
  const std::int64_t lease_us = micros(request->lease);
  const auto run = [&] {
    return with_connection([&](Connection& c) {
      return table_.hand_over(c, name, before.hold_id, to, request->owner, lease_us, request->watchdog);
    });
  };
  auto sent = Clock::now();
  std::uint64_t fence = before.fence != 0 ? before.fence + 1 : 0;
  bool handed = false;
  // A BackendError leaves the old hold in the row until its lease ends (as
  // after a failed release); waiters elsewhere find it expired by their
  // poll or their next bell wait.
  try {
    handed = run();
  } catch (const OutcomeUnknown& e) {
    const LockRow row = read_after_unknown(name, e);
    if (row.held_by(to)) {
      handed = true;
      fence = row.fence;
    } else if (row.held_by(before.hold_id)) {
      sent = Clock::now();
      handed = run();  // matches the old hold or its own late first run, bumping the fence once
      fence = 0;       // read when asked for
    }
  }
  if (!handed) {
    report_lost(name, before.fence, "found already lost at unlock (handing it over)");
    return Handoff::kLost;
  }
  holds_.record_fresh(name, request->owner, to, 1, request->watchdog, sent + request->lease, fence,
                      before.doorbell_session, 0, before.chain_started == SteadyTime{} ? sent : before.chain_started);
  handoffs_.fetch_add(1, std::memory_order_relaxed);
  if (logger_->should_log(spdlog::level::debug))
    logger_->debug("dlock: {} handed over by {}/{} to {}", printable(name), machine_id_, owner, request->owner);
  return Handoff::kHanded;
}

bool Client::force_release(std::string_view name, LockSide side) {
  validate_name(name);
  if (side != LockSide::kMutex) return force_release_rw(name, side);
  CallBudget budget(options_.io_timeout);
  const auto run = [&] { return with_connection([&](Connection& c) { return table_.force_release(c, name); }); };
  bool cleared = false;
  try {
    cleared = run();
  } catch (const OutcomeUnknown& e) {
    const LockRow row = read_after_unknown(name, e);
    cleared = !row.held || run();
  }
  logger_->info("dlock: force-unlock of {} by {}: {}", printable(name), machine_id_,
                cleared ? "cleared a hold" : "was not held");
  hint_free_if_held_here(name);
  waiters_.wake_one(name);
  return cleared;
}

// ---------------------------------------------------------------- session bells

std::uint64_t Client::tagged_hold_id() const {
  const std::uint64_t low = new_hold_id() & ((std::uint64_t{1} << 48) - 1);
  return hold_tag_ << 48 | (low != 0 ? low : 1);
}

bool Client::free_row(std::string_view name, const Hold& before) {
  const std::uint64_t hold_id = before.hold_id;
  const std::uint64_t session = before.doorbell_session;
  const auto quietly = [&](Connection& c) { return table_.release_unwaited(c, name, hold_id); };
  const auto quiet = [&] { return with_connection(quietly); };
  const auto anywhere = [&] {
    return with_connection([&](Connection& c) { return table_.release(c, name, hold_id, 0); });
  };
  // Without a bell there is nothing to ring (and nobody marks a row that
  // records none): one statement.
  if (session == 0) return anywhere();
  // The uncontended case first: where nobody elsewhere marked the row,
  // nothing rings. But a name found marked at its last release most likely
  // is again (its waiter elsewhere marks every hold it waits for): for a
  // while, the ringing release goes first (one statement, not two).
  const bool expect_mark = waited_elsewhere_.left(name).count() > 0;
  if (!expect_mark && quiet()) return true;
  // The bell to ring is the one the row records: the hold's session's.
  // Never wait for that session.
  const std::optional<bool> on_bell_session = [&]() -> std::optional<bool> {
    auto c = pool_.try_acquire_session(session);
    if (!c || (*c)->bell.current().empty()) return std::nullopt;
    Connection& bell_session = **c;
    const std::string rung = bell_session.bell.current();
    bool rang = table_.release_ringing(bell_session, name, hold_id, /*only_marked=*/expect_mark);
    if (!rang && expect_mark) {
      // Not marked after all (or lost): free it quietly; if a waiter
      // marked it in between, ring after all.
      if (quietly(bell_session)) return true;
      rang = table_.release_ringing(bell_session, name, hold_id, false);
    }
    if (!rang) return false;  // the hold was lost
    restamp_after_ring(bell_session, rung);
    rang_for_waiters_elsewhere(name);
    return true;
  }();
  if (on_bell_session) return *on_bell_session;
  // Another thread is using that session (or it is gone): free the row
  // anywhere, and ring the moment the session is returned.
  if (expect_mark && quiet()) return true;
  if (!anywhere()) return false;
  ring_when_idle(session);
  rang_for_waiters_elsewhere(name);
  return true;
}

void Client::rang_for_waiters_elsewhere(std::string_view name) {
  const auto now = Clock::now();
  waited_elsewhere_.mark(name, now + kRingAtOnceFor);
  // Without it, a thread here that locks the name again at once (the one
  // that just released it, or a local waiter) is first at the row every
  // time, and the waiter the ring woke is refused again.
  yields_.mark(name, now + kYieldAfterChain);
}

void Client::ring_when_idle(std::uint64_t session) {
  pool_.run_when_idle(session, [this](Connection& c) {
    const std::string rung = c.bell.current();
    if (rung.empty()) return;
    try {
      table_.ring(c);
    } catch (const BackendError& e) {
      // Not worth failing anyone: the bell goes when its session ends, and
      // the waiters' poll covers them meanwhile.
      logger_->debug("dlock: could not ring session bell {}: {}", rung, e.what());
      return;
    }
    restamp_after_ring(c, rung);
  });
}

void Client::restamp_after_ring(Connection& c, const std::string& rung) {
  const std::vector<NamedHold> others = holds_.on_session(c.session_key());
  if (others.empty()) return;
  const std::string* now = c.bell.current().empty() ? nullptr : &c.bell.current();
  try {
    table_.restamp(c, others, rung, now);
  } catch (const BackendError& e) {
    // Their waiters find the old bell free and fall back to the poll.
    logger_->debug("dlock: could not move {} hold(s) to session bell {}: {}", others.size(),
                   now != nullptr ? *now : std::string("(none)"), e.what());
  }
}

// ---------------------------------------------------------------- losses

void Client::note_lost(std::string_view name, std::uint64_t owner, std::uint64_t generation, const char* why) {
  auto hold = holds_.mark_lost(name, owner, generation);
  if (!hold) return;
  // Ring now rather than never: waiters elsewhere may be blocked on the lost
  // hold's bell while the row is free, expired or taken by someone else.
  if (hold->doorbell_session != 0) ring_when_idle(hold->doorbell_session);
  report_lost(name, hold->fence, why);
  // A local waiter refused because this hold looked live asks again.
  waiters_.wake_one(name);
}

void Client::report_lost(std::string_view name, std::uint64_t fence, const char* why) {
  logger_->warn("dlock: hold on {} (fence {}) lost: {}", printable(name), fence, why);
  notify_lost(name, fence);
}

void Client::notify_lost(std::string_view name, std::uint64_t fence) {
  if (!options_.on_lock_lost || closing_) return;
  io_.post([this, owned = std::string(name), fence] {
    // The client may have started closing since this was posted.
    if (closing_) return;
    try {
      options_.on_lock_lost(owned, fence);
    } catch (const std::exception& e) {
      logger_->error("dlock: on_lock_lost threw: {}", e.what());
    } catch (...) {
      logger_->error("dlock: on_lock_lost threw a non-standard exception");
    }
  });
}

// ---------------------------------------------------------------- introspection

std::optional<Hold> Client::confirmed_hold(std::string_view name, std::uint64_t owner, LockRow* row_out) {
  const auto hold = holds_.find(name, owner);
  // The local lease deadline is measured from when the acquiring statement
  // was sent, so once it passes the hold may already belong to someone else.
  if (!hold || hold->lost || Clock::now() >= hold->deadline) return std::nullopt;
  CallBudget budget(options_.io_timeout);
  const LockRow row = read_row(name);
  if (!row.held_by(hold->hold_id)) {
    note_lost(name, owner, hold->generation, "the row shows another owner or none");
    return std::nullopt;
  }
  if (row_out != nullptr) *row_out = row;
  return hold;
}

LockRow Client::inspect(std::string_view name) {
  validate_name(name);
  CallBudget budget(options_.io_timeout);
  return read_row(name);
}

bool Client::is_locked(std::string_view name, LockSide side) {
  validate_name(name);
  if (side != LockSide::kMutex) return rw_is_locked(name, side);
  CallBudget budget(options_.io_timeout);
  return read_row(name).held;
}

bool Client::is_held_by(std::string_view name, std::uint64_t owner, LockSide side) {
  validate_name(name);
  if (side != LockSide::kMutex) return confirmed_rw_hold(side, name, owner, nullptr).has_value();
  return confirmed_hold(name, owner, nullptr).has_value();
}

int Client::hold_count(std::string_view name, std::uint64_t owner, LockSide side) {
  validate_name(name);
  const auto hold = side != LockSide::kMutex ? confirmed_rw_hold(side, name, owner, nullptr)
                                             : confirmed_hold(name, owner, nullptr);
  return hold ? static_cast<int>(hold->count) : 0;
}

std::optional<Millis> Client::remaining_ttl(std::string_view name, LockSide side) {
  validate_name(name);
  if (side != LockSide::kMutex) return rw_remaining_ttl(name, side);
  CallBudget budget(options_.io_timeout);
  const LockRow row = read_row(name);
  if (!row.held) return std::nullopt;
  return Millis(std::max<std::int64_t>(0, row.ttl_us.value_or(0) / 1000));
}

std::uint64_t Client::fencing_token(std::string_view name, std::uint64_t owner, LockSide side) {
  validate_name(name);
  if (side != LockSide::kMutex) return rw_fencing_token(name, owner, side);
  const auto hold = holds_.find(name, owner);
  if (!hold || hold->lost || Clock::now() >= hold->deadline) return 0;
  if (hold->fence != 0) return hold->fence;
  LockRow row;
  const auto confirmed = confirmed_hold(name, owner, &row);
  if (!confirmed) return 0;
  holds_.set_fence(name, owner, confirmed->generation, row.fence);
  return row.fence;
}

// ---------------------------------------------------------------- background

void Client::renew_tick(const IoThread::ConnectionSource& connection) {
  auto refs = holds_.watchdog_holds();
  if (refs.empty()) return;
  // Within one tick, not io_timeout: a row another transaction has locked
  // fails the renewal after one lock wait (a second on this connection),
  // and the others are renewed around it this same tick, well inside any
  // lease.
  CallBudget budget(std::min(options_.io_timeout, renew_period()));
  const auto now = Clock::now();
  std::vector<HoldRef> live;
  live.reserve(refs.size());
  for (auto& r : refs) {
    if (r.deadline <= now) {
      note_lost(r.name, r.owner, r.generation, "renewal failed past the lease");
    } else {
      live.push_back(std::move(r));
    }
  }
  if (live.empty()) return;
  std::vector<NamedHold> holds;
  holds.reserve(live.size());
  for (const auto& r : live) holds.push_back(NamedHold{r.name, r.hold_id});

  const std::int64_t lease_us = micros(options_.watchdog_timeout);
  auto sent = Clock::now();
  std::size_t renewed = 0;
  try {
    try {
      renewed = table_.renew(connection(), holds, lease_us);
    } catch (const OutcomeUnknown&) {
      // A renewal only extends live holds of this client: running it again
      // on a fresh connection is safe whatever the first run did.
      sent = Clock::now();
      renewed = table_.renew(connection(), holds, lease_us);
    }
  } catch (const BackendError& e) {
    if (e.code() != mysql_error::kLockWaitTimeout) throw;
    // A row locked by someone else's transaction: renew the others around it.
    logger_->warn("dlock: renewal waited on a row locked by another transaction; renewing around it");
    sent = Clock::now();
    renewed = table_.renew_skipping_locked(connection(), holds, lease_us);
  }
  if (renewed == live.size()) {
    holds_.extend(live, sent + options_.watchdog_timeout);
    return;
  }
  // Fewer rows than holds: find out which holds are gone. A hold the read
  // still shows is live for what its row says is left (a row skipped
  // because it was locked was not renewed, but is not lost yet either).
  std::vector<std::string> names;
  for (const auto& h : holds) names.push_back(h.name);
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  const auto read_sent = Clock::now();
  std::unordered_map<std::string, LockRow> rows;
  for (auto& row : table_.read_many(connection(), names)) rows.emplace(row.name, std::move(row));
  for (auto& r : live) {
    auto it = rows.find(r.name);
    if (it != rows.end() && it->second.held_by(r.hold_id)) {
      holds_.extend({r}, read_sent + Micros(std::max<std::int64_t>(0, it->second.ttl_us.value_or(0))));
    } else {
      note_lost(r.name, r.owner, r.generation, "the watchdog found the row taken over or force-unlocked");
    }
  }
}

void Client::poll_tick(const IoThread::ConnectionSource& connection) {
  auto names = waiters_.names();
  // Mutex names only: every other key starts with NUL (no name does).
  names.erase(std::remove_if(names.begin(), names.end(), [](const std::string& k) { return k.front() == '\0'; }),
              names.end());
  if (names.empty()) return;
  CallBudget budget(options_.io_timeout);
  std::vector<std::string> free;
  try {
    free = table_.free_among(connection(), names);
  } catch (const OutcomeUnknown&) {
    free = table_.free_among(connection(), names);  // a read: safe to repeat
  }
  for (const auto& name : free) {
    hint_free_if_held_here(name);  // that local hold is lost
    waiters_.wake_one(name);
  }
}

void Client::hint_free_if_held_here(std::string_view name) {
  if (holds_.live_deadline(name)) free_hints_.mark(name, NameMarks::Clock::time_point::max());
}

}  // namespace dlock::details
