#include "engine/engine.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <unistd.h>

#include <algorithm>

#include "base/identity.hpp"
#include "base/micros.hpp"
#include "base/printable.hpp"
#include "base/validation.hpp"
#include "sql/bells.hpp"

namespace dlock::details {

namespace {

const Options& validated(const Options& options) {
  validate_options(options);
  return options;
}

std::shared_ptr<spdlog::logger> choose_logger(const Options& options) {
  if (options.logger) return options.logger;
  static std::mutex mutex;
  std::lock_guard<std::mutex> guard(mutex);
  if (auto existing = spdlog::get("dlock")) return existing;
  return spdlog::stderr_color_mt("dlock");
}

// The io thread's connection waits at most a second for a row lock: a row
// locked by a foreign transaction must not stall the watchdog's renewal of
// every other hold (it renews around it, see renew_tick).
// The client's connection settings, counting into `counters` (may be null).
ConnectionSettings counted_settings(const Options& options, std::shared_ptr<MetricCounters> counters) {
  ConnectionSettings s = ConnectionSettings::from(options);
  s.counters = std::move(counters);
  return s;
}

// The io thread's statements (renewals, polls, intents, rings) wait at most a
// renewal period for an answer, never less than two seconds (above the row
// lock wait): a statement lost in a partition must not keep the next
// renewal waiting for all of io_timeout.
ConnectionSettings io_settings(const ConnectionSettings& settings, Millis renew_period) {
  ConnectionSettings s = settings;
  s.lock_wait_seconds = 1;
  s.io_timeout = std::clamp(renew_period, Millis(2'000), std::max(Millis(2'000), settings.io_timeout));
  return s;
}

// Bell connections wait in line (or on a queue entry) for up to
// kTurnWaitSeconds in one statement: a hundred clients waiting in turn
// then cost the server a few statements a second between them. Their read
// timeout is a little longer (a statement lost in a partition holds up
// only the bell connection: the poller covers the waiters meanwhile).
ConnectionSettings bell_settings(const ConnectionSettings& settings) {
  ConnectionSettings s = settings;
  // Row lock waits (intents) as on the other connections.
  if (s.lock_wait_seconds == 0)
    s.lock_wait_seconds = std::max<int>(1, static_cast<int>((settings.io_timeout.count() + 999) / 1000) - 1);
  s.io_timeout = std::max(settings.io_timeout, Millis((Engine::kTurnWaitSeconds + 3) * 1000));
  return s;
}

}  // namespace

Engine::Engine(Options options)
    : AcquireCounting(validated(options).metrics),
      KindContext(options.machine_id, pool_, logger_, metrics_.get()),
      options_(std::move(options)),
      logger_(choose_logger(options_)),
      settings_(counted_settings(options_, metrics_)),
      rows_(options_.table, logger_),
      schema_(options_.table, logger_),
      pool_(settings_, options_.pool_size),
      clock_([this] { return count_due_losses(); }),
      io_(io_settings(settings_, renew_period()), logger_),
      async_(options_.pool_size) {
  waiters_.count_wakes_in(metrics_.get());
  holds_.on_earlier_deadline([this](SteadyTime when) { clock_.wake_at(when); });
}

void Engine::add_kind(std::unique_ptr<HoldKind> kind) {
  kinds_[static_cast<std::size_t>(kind->traits.kind)] = std::move(kind);
}

HoldKind& Engine::kind(Kind k) const { return *kinds_[static_cast<std::size_t>(k)]; }

void Engine::start() {
  if (settings_.servers) {
    // Every waiter retries at once on the new server: its bell connection
    // and the poller's may still be stuck on the old one.
    settings_.servers->on_move([this](const ServerChoice::Server& from, const ServerChoice::Server& to) {
      logger_->warn("dlock: client {}: cannot use {}:{}; moving to {}:{} (it stays there until that fails)",
                    machine_id_, from.host, from.port, to.host, to.port);
      if (metrics_) metrics_->failover();
      for (const auto& key : waiters_.names()) waiters_.wake_all(key);
    });
  }
  // Connecting here makes an unreachable database fail at construction.
  {
    CallBudget budget(options_.io_timeout);
    with_connection([&](Connection& c) {
      schema_.prepare(c, options_.create_table);
      return 0;
    });
  }
  io_.every(renew_period(), "renewing leases", [this](const IoThread::ConnectionSource& c) { watchdog_.tick_or_retry(c); });
  io_.every(options_.poll_interval, "polling waited-for names",
            [this](const IoThread::ConnectionSource& c) { poll_tick(c); });
  if (options_.fast_wakeup) {
    // A bell wait must end before io_timeout (a bell connection's read
    // timeout, but for the longer waits in turn: see bell_settings).
    const auto io_seconds = (options_.io_timeout.count() + 999) / 1000;
    const int wait_seconds = static_cast<int>(std::min<std::int64_t>(10, io_seconds - 1));
    if (wait_seconds >= 1) {
      BellWatcher::Hooks hooks;
      hooks.ring = [this](const NameKey& key) {
        const WakeSourceScope source(WakeSource::kBell);
        // Readers share what a release lets in, and a queued waiter may be the
        // one granted the hold; the other kinds take turns.
        const HoldKind::Traits& traits = kind(key.kind).traits;
        if (traits.shared || traits.queues) {
          waiters_.wake_all(key);
        } else {
          waiters_.wake_one(key);
        }
      };
      hooks.waited = [this](const NameKey& key) { return waiters_.has(key); };
      hooks.interrupt = [this](SessionAddress session, std::function<bool()> still_waiting) {
        io_.post("interrupting a bell wait",
                 [session, still_waiting = std::move(still_waiting)](const IoThread::ConnectionSource& connection) {
                   // Checked again here, right before the KILL: the wait may have ended.
                   if (still_waiting()) interrupt_bell_wait(connection(), session);
                 });
      };
      hooks.blockers = [this](Kind k) { return kind(k).traits.blocked_by; };
      hooks.subscribed = [this](const NameKey& key) { return waiters_.has_subscriber(key); };
      hooks.policy = [this](Kind k) { return kind(k).traits.wake; };
      hooks.line = [this](const NameKey& key) {
        return line_lock_name(options_.database, options_.table, static_cast<int>(key.kind), key.name);
      };
      hooks.queue_place = [this](Connection& c, const NameKey& key) {
        return kind(key.kind).queue_place(*this, c, key.name);
      };
      hooks.park = [this](Connection& c, const NameKey& key, int seconds, const std::function<bool()>& still_free) {
        return kind(key.kind).park(*this, c, key.name, seconds, still_free);
      };
      bells_ = std::make_unique<BellWatcher>(bell_settings(settings_), rows_, hold_tag_, options_.wakeup_connections,
                                             wait_seconds, logger_, std::move(hooks), BellWatcher::kCloseIdleAfter,
                                             kTurnWaitSeconds);
    } else {
      logger_->info("dlock: fast_wakeup needs io_timeout >= 2 s (a bell wait must end before the read timeout); "
                    "waiters in this client rely on polling");
    }
  }
  clock_.start();
  io_.start();
  started_ = true;
  logger_->debug("dlock: client {} connected to {}/{} table {}", machine_id_,
                 settings_.servers ? settings_.servers->describe() : options_.host + ":" + std::to_string(options_.port),
                 options_.database, options_.table);
}

Engine::~Engine() {
  closing_ = true;  // no on_lock_lost from here on (notify_lost checks it)
  // No hold is counted lost while the client goes: its holds are released.
  clock_.stop();
  // Pending asynchronous waits end with Cancelled; running statements
  // finish; then the workers stop.
  async_.shutdown();
  // The watcher stops while the io thread runs (it sends the KILLs that end
  // its waits), and is destroyed after it (the poller asks it questions).
  if (bells_) bells_->stop();
  io_.stop();
  bells_.reset();
  // A client whose start() failed holds nothing and wrote no row.
  if (started_) release_all_at_shutdown();
  // The move hook uses members destroyed before settings_ (waiters_).
  if (settings_.servers) settings_.servers->on_move(nullptr);
}

void Engine::release_all_at_shutdown() {
  const auto holds = holds_.live();
  try {
    CallBudget budget(options_.io_timeout);
    with_connection([&](Connection& c) {
      std::vector<HeldRow> plain;
      for (const auto& h : holds) {
        // A kind whose release is its own statement (the read side's also
        // uncounts the hold on its head row): one statement each.
        if (HoldKind& k = kind(h.key.kind); k.traits.frees_alone) {
          k.free(*this, c, h.key, h.hold_id, 0, HoldRows::Marks::kAny, false);
        } else {
          plain.push_back(h);
        }
      }
      const auto freed = rows_.free_all(c, plain);
      for (const auto& key : take_all_intents()) kind(key.kind).clear_intent(*this, c, key.name);
      for (const auto& k : kinds_)
        if (k) k->shutdown(*this, c);
      if (!holds.empty()) logger_->debug("dlock: client {} released {} hold(s) at shutdown", machine_id_, freed);
      return 0;
    });
  } catch (const std::exception& e) {
    logger_->warn("dlock: client {} could not release its {} hold(s) at shutdown; they expire with their leases: {}",
                  machine_id_, holds.size(), e.what());
  }
}

bool Engine::take_reconciled(HoldKind::Taken& t, NameKeyView key, std::uint64_t hold_id, TakeLearns learns,
                             const std::function<bool(Connection&, const std::string* bell)>& statement) {
  return run_reconciled(
      key.name,
      [&](Connection& c) {
        // The row records this session's bell (taken on the session's
        // first take), so waiters elsewhere can block on it.
        const std::string* bell = options_.fast_wakeup ? take_session_bell(c, logger_) : nullptr;
        const bool taken = statement(c, bell);
        t.bell_session = taken && bell != nullptr ? c.session_key() : 0;
        return taken;
      },
      [&](Connection& c) {
        t.bell_session = 0;  // the session died, and its bell with it
        const auto row = rows_.find(c, key.kind, key.name, hold_id);
        if (!row) return Verdict::kRunAgain;
        if (learns == TakeLearns::kSlotAndFence) {
          t.slot = row->key.slot;
          t.fence = row->fence;
        }
        return Verdict::kApplied;
      });
}

std::vector<std::unique_lock<std::mutex>> Engine::lock_stripes(const std::vector<NameKey>& keys,
                                                                std::uint64_t owner) {
  std::vector<std::mutex*> stripes;
  stripes.reserve(keys.size());
  for (const auto& key : keys) stripes.push_back(&owner_mutex(kind(key.kind).traits.serial, key.name, owner));
  return lock_in_order(std::move(stripes));
}

Millis Engine::renew_period() const { return std::max(Millis(1), options_.watchdog_timeout / 3); }

Millis Engine::intent_lease() const { return std::max(Millis(1000), options_.poll_interval * 3); }

// ---------------------------------------------------------------- intents

void Engine::set_intent(NameKeyView key) {
  std::lock_guard<std::mutex> intending(intent_statements_mutex_);
  if (has_intent(key)) return;  // the poller keeps it alive
  try {
    CallBudget budget(options_.io_timeout);
    const auto held = with_connection([&](Connection& c) {
      return kind(key.kind).set_intents(*this, c, {std::string(key.name)},
                                 micros(intent_lease()));
    });
    // Another client's live intent: left alone; the poller tries again.
    if (held.empty()) return;
    record_intent(NameKey(key));
  } catch (const BackendError& e) {
    logger_->debug("dlock: could not set this client's intent on {} {}: {}", kind_name(key.kind), printable(key.name),
                   e.what());
  }
}

void Engine::drop_intent(const NameKey& key, bool acquired) {
  if (!forget_intent(key)) return;
  if (!acquired) {
    try {
      CallBudget budget(options_.io_timeout);
      with_connection([&](Connection& c) {
        clear_intent_on(key, c);
        return 0;
      });
    } catch (const BackendError& e) {
      // The intent ends with its lease (3 poll intervals).
      logger_->debug("dlock: could not clear this client's intent on {}: {}", printable(key.name), e.what());
    }
    return;
  }
  clear_later(key);
  io_.post("clearing an intent", [this, key](const IoThread::ConnectionSource& connection) {
    CallBudget budget(options_.io_timeout);
    clear_pending_intent(key, connection);
  });
}

void Engine::clear_pending_intent(NameKeyView key, const std::function<Connection&()>& connection) {
  if (!intent_pending(key)) return;
  {
    // The key stays listed until its intent is gone, and this lock is held
    // meanwhile: a release that finds it listed waits here for a clear in
    // flight, or clears it itself (whichever comes first clears it).
    std::lock_guard<std::mutex> intending(intent_statements_mutex_);
    if (!intent_pending(key)) return;
    if (!has_intent(key)) kind(key.kind).clear_intent(*this, connection(), key.name);
    cleared(key);
  }
  wake_other_side(key);
}

void Engine::wake_other_side(NameKeyView key) {
  if (const auto other = kind(key.kind).traits.other_side) waiters_.wake_all(NameKeyView{*other, key.name});
}

void Engine::clear_intent_before_release(NameKeyView key) {
  if (!intent_pending(key)) return;
  // Readers it held back must not find it when the release wakes them.
  try {
    std::optional<PooledConnection> c;  // taken only if there is SQL to run
    clear_pending_intent(key, [&]() -> Connection& {
      if (!c) c.emplace(pooled_connection());
      return **c;
    });
  } catch (const BackendError& e) {
    logger_->debug("dlock: could not clear this client's intent on {}: {}", printable(key.name), e.what());
  }
}

void Engine::clear_intent_on(const NameKey& key, Connection& c) {
  {
    // Under the lock the poller sets intents under, so no renewal falls between;
    // and not if a new waiter here has set it again meanwhile.
    std::lock_guard<std::mutex> intending(intent_statements_mutex_);
    if (has_intent(key)) return;
    kind(key.kind).clear_intent(*this, c, key.name);
  }
  wake_other_side(key);  // readers held back by a waiting writer may go now
}

// ---------------------------------------------------------------- losses

void Engine::note_lost(NameKeyView key, std::uint64_t owner, std::uint64_t generation, const char* why,
                       bool taken_over) {
  const auto hold = holds_.mark_lost(key, owner, generation);
  if (hold) report_loss(key, *hold, why, taken_over);  // else: not there, or lost and told before
}

void Engine::note_lost(NameKeyView key, const Hold& released, const char* why, bool taken_over) {
  report_loss(key, released, why, taken_over);
}

void Engine::report_loss(NameKeyView key, const Hold& hold, const char* why, bool taken_over) {
  if (metrics_) {
    const LossCause cause = taken_over                                            ? LossCause::kTakenOver
                            : std::chrono::steady_clock::now() < hold.deadline ? LossCause::kForced
                                                                                 : LossCause::kLeaseRanOut;
    metrics_->lost(metric_kind(key.kind), cause);
  }
  // Ring now rather than never: waiters elsewhere may be blocked on the lost
  // hold's bell while the row is free, expired or taken by someone else.
  // On the io thread: a finder of a loss (the clock) may run no statement.
  if (hold.bell_session != 0) {
    io_.post("ringing a lost hold's bell",
             [this, session = hold.bell_session](const IoThread::ConnectionSource&) { ring_when_idle(session); });
  }
  HoldKind& k = kind(key.kind);
  const std::uint64_t fence = k.traits.reports_fence ? hold.fence : 0;
  logger_->warn("dlock: {} hold on {} (fence {}) lost: {}", kind_name(key.kind), printable(key.name), fence, why);
  notify_lost(key.name, fence);
  // A local waiter refused because this hold looked live asks again.
  k.wake(waiters_, key.name);
}

void Engine::notify_lost(std::string_view name, std::uint64_t fence) {
  if (!options_.on_lock_lost || closing_) return;
  clock_.post([this, owned = std::string(name), fence] {
    if (closing_) return;  // the client may have started closing since this was posted
    try {
      options_.on_lock_lost(owned, fence);
    } catch (const std::exception& e) {
      logger_->error("dlock: on_lock_lost threw: {}", e.what());
    } catch (...) {
      logger_->error("dlock: on_lock_lost threw a non-standard exception");
    }
  });
}

SteadyTime Engine::count_due_losses() {
  for (const auto& r : holds_.due(std::chrono::steady_clock::now()))
    note_lost(r.key, r.owner, r.generation, "its local lease deadline passed (renewals did not get through, or a "
                                            "fixed lease ran out before its release)");
  return holds_.next_deadline();
}

void Engine::hint_free_if_held_here(NameKeyView key) {
  if (holds_.live_deadline(key)) free_hints_.note(key, NameNotes::Clock::time_point::max());
}

}  // namespace dlock::details
