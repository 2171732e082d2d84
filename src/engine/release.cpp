// Release: one count down, a direct handoff to a local waiter, or the row
// freed (ringing for waiters elsewhere); force-unlock.
#include <spdlog/spdlog.h>

#include <map>

#include "base/micros.hpp"
#include "base/printable.hpp"
#include "base/validation.hpp"
#include "engine/engine.hpp"
#include "sql/bells.hpp"

namespace dlock::details {

namespace {
using Clock = std::chrono::steady_clock;
}  // namespace

void Engine::release(NameKeyView key, std::uint64_t owner, Millis at_least) {
  validate_name(key.name);
  HoldKind& k = kind(key.kind);
  // A local waiter claimed for a handoff: told once the release is done,
  // whatever its outcome, and after the owner's stripe is let go (the
  // waiter may resume on this very thread). Granted: it resumes holding
  // the hold; else the claim's end is the release's wake and it tries.
  WaiterRegistry::ClaimedWaiter claim;
  std::lock_guard<std::mutex> serial(owner_mutex(k.traits.serial, key.name, owner));
  const std::optional<Hold> before = holds_.take_one(key, owner);
  if (!before) {
    throw NotHeldError(std::string("dlock: unlock of ") + kind_name(key.kind) + " \"" + printable(key.name) +
                       "\" by an owner (" + std::to_string(owner) + ") that holds no hold on it in this client");
  }
  CallBudget budget(options_.io_timeout);
  if (!ends_hold(k, key, owner, *before)) return;
  const RowKey row{key.kind, std::string(key.name), before->slot};
  const std::int64_t at_least_us = micros(at_least);
  if (at_least_us == 0 && k.traits.hands_over) claim_for_handoff(key, before->chain_started, claim);
  bool released = false;
  try {
    if (claim.waiter) {
      switch (hand_over(k, key, owner, *before, claim.waiter)) {
        case Handoff::kHanded:
          claim.grant();  // it holds the hold
          if (metrics_) metrics_->hold_ended(metric_kind(key.kind), Clock::now() - before->acquired);
          return;
        case Handoff::kLost:
          return;  // reported; the claim's wake lets the waiter try the row
        case Handoff::kDeclined:
          break;
      }
    }
    released = free_row(k, row, *before, at_least_us);
  } catch (const BackendError& e) {
    logger_->error("dlock: could not release {} {}; it stays taken until its lease ends: {}", kind_name(key.kind),
                   printable(key.name), e.what());
    return;
  }
  if (!released) {
    // Counted and told like every loss; its waiters are woken (a claimed
    // one also by the claim's resolution).
    note_lost(key, *before, "found already lost at unlock");
    return;
  }
  if (metrics_) metrics_->hold_ended(metric_kind(key.kind), Clock::now() - before->acquired);
  if (logger_->should_log(spdlog::level::debug))
    logger_->debug("dlock: {} {} released by {}/{}", kind_name(key.kind), printable(key.name), machine_id_, owner);
  if (!claim.waiter) k.wake(waiters_, key.name);  // else the claim's resolution is the wake
}

bool Engine::ends_hold(HoldKind& k, NameKeyView key, std::uint64_t owner, const Hold& before) {
  if (before.lost) {
    logger_->debug("dlock: unlock of lost hold {} (count {} left)", printable(key.name), before.count - 1);
    if (before.count == 1) k.dropped(key.name, before.slot);
    return false;
  }
  if (before.count > 1) {
    count_down(key, owner, before);
    return false;
  }
  clear_intent_before_release(key);
  return true;
}

void Engine::count_down(NameKeyView key, std::uint64_t owner, const Hold& before) {
  const unsigned target = before.count - 1;
  const RowKey row{key.kind, std::string(key.name), before.slot};
  bool released = false;
  try {
    released = run_reconciled(
        key.name, [&](Connection& c) { return rows_.release_to(c, row, before.hold_id, target); },
        [&](Connection& c) {
          const auto found = rows_.find(c, row.kind, row.name, before.hold_id);
          if (!found) return Verdict::kNotApplied;
          return found->state == target ? Verdict::kApplied : Verdict::kRunAgain;
        });
  } catch (const BackendError& e) {
    logger_->error("dlock: could not release {} {}; it stays taken until its lease ends: {}", kind_name(key.kind),
                   printable(key.name), e.what());
    return;
  }
  if (!released) {
    note_lost(key, owner, before.generation, "found already lost at unlock");
    return;
  }
  if (logger_->should_log(spdlog::level::debug))
    logger_->debug("dlock: {} {} released by {}/{} (count {})", kind_name(key.kind), printable(key.name), machine_id_,
                   owner, target);
}

void Engine::claim_for_handoff(NameKeyView key, SteadyTime chain_started, WaiterRegistry::ClaimedWaiter& claim) {
  if (!handoffs_enabled_.load(std::memory_order_relaxed)) return;
  const Millis chain_bound(handoff_chain_ms_.load(std::memory_order_relaxed));
  // (A client elsewhere whose intent is on the row ends the chain too: the
  // kind's handoff statement refuses while its intent is live.)
  if (chain_started == SteadyTime{} || Clock::now() - chain_started < chain_bound) {
    claim.waiter = waiters_.claim(key);
  } else if (waiters_.has(key)) {
    // Held back from now: the release rings inside its statement, before it
    // returns, and a local waiter woken by that ring must not beat the
    // other client it rang for.
    yields_.note(key, Clock::now() + kYieldAfterChain);
  }
}

Engine::Handoff Engine::hand_over(HoldKind& k, NameKeyView key, std::uint64_t owner, const Hold& before,
                                  const std::shared_ptr<WaiterRegistry::Parked>& claimed) {
  // The request stays valid until the claim is resolved: its waiter waits.
  const auto* request = static_cast<const AcquireRequest*>(claimed->handoff_request());
  if (request == nullptr || NameKeyView(request->key) != key) return Handoff::kDeclined;  // interrupted since
  const auto now = Clock::now();
  if (!request->forever && now >= request->deadline) return Handoff::kDeclined;
  if (!k.fits(before, *request)) return Handoff::kDeclined;
  // The lease may have run out (the watchdog could not renew): let the
  // release find out, rather than hand over what may be gone.
  if (before.deadline <= now) return Handoff::kDeclined;
  // The new hold is the waiter's owner's: serialize with that owner's other
  // operations on the name (the caller holds `owner`'s stripe, which may be
  // the same one). Never wait for it: a busy owner takes the row the usual way.
  std::mutex& theirs = owner_mutex(k.traits.serial, key.name, request->owner);
  std::unique_lock<std::mutex> serial(theirs, std::defer_lock);
  if (&theirs != &owner_mutex(k.traits.serial, key.name, owner) && !serial.try_lock()) return Handoff::kDeclined;
  if (holds_.find(key, request->owner)) return Handoff::kDeclined;  // e.g. a lost hold it still owes unlock() for

  const RowKey row{key.kind, std::string(key.name), before.slot};
  const std::uint64_t to = tagged_hold_id();
  auto sent = Clock::now();
  bool lost = false;
  // A BackendError leaves the old hold in the row until its lease ends (as
  // after a failed release); waiters elsewhere find it expired by their
  // poll or their next bell wait.
  const bool handed = run_reconciled(
      key.name,
      [&](Connection& c) {
        sent = Clock::now();
        return k.hand_over(*this, c, row, before.hold_id, to, *request);
      },
      [&](Connection& c) {
        if (rows_.find(c, row.kind, row.name, to)) return Verdict::kApplied;
        if (rows_.find(c, row.kind, row.name, before.hold_id)) return Verdict::kRunAgain;
        lost = true;
        return Verdict::kNotApplied;
      });
  if (!handed) {
    // Refused: the old hold is no longer live, or the kind's rule refuses
    // the handoff now (a read taken under the write hold). Only the first
    // is a loss; the other releases as usual.
    if (!lost) lost = !read([&](Connection& c) { return rows_.find(c, row.kind, row.name, before.hold_id); });
    if (!lost) return Handoff::kDeclined;
    note_lost(key, before, "found already lost at unlock (handing it over)");
    return Handoff::kLost;
  }
  Hold next;
  next.hold_id = to;
  next.count = 1;
  next.fence = before.fence != 0 ? before.fence + static_cast<std::uint64_t>(k.traits.fence_step) : 0;
  next.watchdog = request->watchdog;
  next.deadline = sent + request->lease;
  next.bell_session = before.bell_session;  // the row keeps the bell: the new hold rings from the same session
  next.slot = before.slot;
  next.bound = request->bound;
  next.chain_started = before.chain_started == SteadyTime{} ? sent : before.chain_started;
  holds_.record_fresh(key, request->owner, next);
  // The statement cleared this client's intent on the row.
  if (k.traits.intents == HoldKind::Traits::Intent::kWhenNotRung) intent_taken(key);
  handoffs_.fetch_add(1, std::memory_order_relaxed);
  if (logger_->should_log(spdlog::level::debug))
    logger_->debug("dlock: {} {} handed over by {}/{} to {}", kind_name(key.kind), printable(key.name), machine_id_,
                   owner, request->owner);
  return Handoff::kHanded;
}

bool Engine::free_row(HoldKind& k, const RowKey& row, const Hold& before, std::int64_t at_least_us) {
  const NameKeyView key{row.kind, row.name};
  const std::uint64_t hold_id = before.hold_id;
  const std::uint64_t session = before.bell_session;
  const auto free_on = [&](Connection& c, HoldRows::Marks marks, bool ring) {
    return k.free(*this, c, row, hold_id, at_least_us, marks, ring);
  };
  // Whether the release applied, when its connection died: the hold gone,
  // or kept taken by no one (unlock_at_least: count 0, lease running).
  const auto gone = [&](Connection& c) {
    const auto found = rows_.find(c, row.kind, row.name, hold_id);
    return found && found->state > 0 ? Verdict::kRunAgain : Verdict::kApplied;
  };
  const auto anywhere = [&](HoldRows::Marks marks) {
    return run_reconciled(row.name, [&](Connection& c) { return free_on(c, marks, false); }, gone);
  };
  // Without a bell there is nothing to ring (and nobody marks a row that
  // records none): one statement.
  if (session == 0) return anywhere(HoldRows::Marks::kAny);
  // The uncontended case first: where nobody elsewhere marked the row,
  // nothing rings. But a name found marked at its last release most likely
  // is again (its waiter elsewhere marks every hold it waits for): for a
  // while, the ringing release goes first (one statement, not two).
  const bool expect_mark = waited_elsewhere_.left(key).count() > 0;
  if (!expect_mark && anywhere(HoldRows::Marks::kUnmarked)) return true;
  // The bell to ring is the one the row records: the hold's session's.
  bool rang = false;
  const auto on_bell_session = free_on_bell_session(session, row.name, 1, gone, [&](Connection& c, bool& rung) {
    rung = free_on(c, expect_mark ? HoldRows::Marks::kMarked : HoldRows::Marks::kAny, true);
    if (!rung && expect_mark) {
      // Not marked after all (or lost): free it quietly; if a waiter
      // marked it in between, ring after all.
      if (free_on(c, HoldRows::Marks::kUnmarked, false)) return std::size_t{1};
      rung = free_on(c, HoldRows::Marks::kAny, true);
    }
    return std::size_t{rung ? 1u : 0u};
  }, rang);
  if (rang) rang_for_waiters_elsewhere(key);
  if (on_bell_session) return *on_bell_session > 0;  // 0: the hold was lost
  // Another thread is using that session (or it is gone): free the row
  // anywhere, and ring the moment the session is returned.
  if (expect_mark && anywhere(HoldRows::Marks::kUnmarked)) return true;
  if (!anywhere(HoldRows::Marks::kAny)) return false;
  ring_when_idle(session);
  rang_for_waiters_elsewhere(key);
  return true;
}

void Engine::rang_for_waiters_elsewhere(NameKeyView key) {
  const auto now = Clock::now();
  waited_elsewhere_.note(key, now + kRingAtOnceFor);
  // Without it, a thread here that takes the name again at once (the one
  // that just released it, or a local waiter) is first at the row every
  // time, and the waiter the ring woke is refused again.
  yields_.note(key, now + kYieldAfterChain);
}

void Engine::ring_when_idle(std::uint64_t session) {
  pool_.run_when_idle(session, [this](Connection& c) {
    const std::string rung = c.bell.current();
    if (rung.empty()) return;
    try {
      ring(c, logger_);
    } catch (const BackendError& e) {
      // Not worth failing anyone: the bell goes when its session ends, and
      // the waiters' poll covers them meanwhile.
      logger_->debug("dlock: could not ring session bell {}: {}", rung, e.what());
      return;
    }
    restamp_after_ring(c, rung);
  });
}

void Engine::restamp_after_ring(Connection& c, const std::string& rung) {
  std::vector<HeldRow> others = holds_.on_session(c.session_key());
  for (const auto& k : kinds_)
    if (k) k->rows_with_bell_of(c.session_key(), others);
  if (others.empty()) return;
  const std::string* now = c.bell.current().empty() ? nullptr : &c.bell.current();
  try {
    rows_.restamp(c, others, rung, now);
  } catch (const BackendError& e) {
    // Their waiters find the old bell free and fall back to the poll.
    logger_->debug("dlock: could not move {} hold(s) to session bell {}: {}", others.size(),
                   now != nullptr ? *now : std::string("(none)"), e.what());
  }
}

void Engine::free_quietly(HoldKind& k, const RowKey& row, std::uint64_t hold_id) {
  try {
    with_connection([&](Connection& c) { return k.free(*this, c, row, hold_id, 0, HoldRows::Marks::kAny, false); });
  } catch (const BackendError& e) {
    logger_->warn("dlock: could not free {} {} after finding its hold lost; it expires with its lease: {}",
                  kind_name(row.kind), printable(row.name), e.what());
  }
}

void Engine::free_rows(const std::vector<std::pair<NameKey, Hold>>& last) {
  // One statement per bell session (holds taken together share one).
  std::map<std::uint64_t, std::vector<std::size_t>> by_session;
  for (std::size_t i = 0; i < last.size(); ++i) by_session[last[i].second.bell_session].push_back(i);
  for (const auto& [session, members] : by_session) {
    std::vector<HeldRow> rows;
    std::vector<Hold> holds;
    for (std::size_t i : members) {
      const auto& [key, hold] = last[i];
      rows.push_back(HeldRow{RowKey{key.kind, key.name, hold.slot}, hold.hold_id});
      holds.push_back(hold);
    }
    const auto sent = Clock::now();
    bool rang = false;
    std::size_t freed = 0;
    try {
      freed = free_on_session(session, rows, rang);
    } catch (const BackendError& e) {
      logger_->error("dlock: could not release {} hold(s) (first {} {}); they stay taken until their leases end: {}",
                     rows.size(), kind_name(rows.front().key.kind), printable(rows.front().key.name), e.what());
      continue;
    }
    if (freed < rows.size()) report_row_losses(rows, holds, sent);
    for (const auto& row : rows) {
      const NameKeyView key{row.key.kind, row.key.name};
      if (rang) rang_for_waiters_elsewhere(key);
      kind(row.key.kind).wake(waiters_, row.key.name);
    }
  }
}

std::size_t Engine::free_on_session(std::uint64_t session, const std::vector<HeldRow>& rows, bool& rang) {
  const std::string& first = rows.front().key.name;
  // Whether the release applied, when its connection died: no hold still
  // counted.
  const auto gone = [&](Connection& c) {
    for (const auto& row : rows_.read_holds(c, rows))
      if (row.state > 0) return Verdict::kRunAgain;
    return Verdict::kApplied;
  };
  if (session != 0) {
    const auto freed = free_on_bell_session(session, first, rows.size(), gone, [&](Connection& c, bool& rung) {
      const std::size_t n = rows_.free_all(c, rows, true);
      rung = n > 0;  // rung, or the session closes (some rows were lost): its bell is given back
      return n;
    }, rang);
    if (freed) return *freed;
  }
  std::size_t freed = 0;
  run_reconciled(first, [&](Connection& c) {
    freed = rows_.free_all(c, rows);
    return freed > 0;
  }, gone);
  if (session != 0 && freed > 0) {
    ring_when_idle(session);
    rang = true;
  }
  return freed;
}

// Runs `free_there` on `session`, the bell session the rows record, when
// that session is idle and still has its bell: a free that rings in the
// same statement and wakes the rows' waiters elsewhere. Never waits for
// that session. It returns how many of the `count` rows it freed and sets
// `rang`; a ring that freed them all re-stamps the session's other rows.
// Nothing when the session is busy or gone, or when its connection died
// and `gone` finds the rows not freed: the caller frees them anywhere and
// rings once the session is idle (ring_when_idle).
std::optional<std::size_t> Engine::free_on_bell_session(std::uint64_t session, std::string_view name,
                                                        std::size_t count,
                                                        const std::function<Verdict(Connection&)>& gone,
                                                        const RingingFree& free_there, bool& rang) {
  auto c = pool_.try_acquire_session(session);
  if (!c || (*c)->bell.current().empty()) return std::nullopt;
  const std::string rung = (*c)->bell.current();
  try {
    const std::size_t freed = free_there(**c, rang);
    if (rang && freed == count) restamp_after_ring(**c, rung);
    return freed;
  } catch (const OutcomeUnknown& lost) {
    // The session and its bell are gone (a bell rings as its session
    // ends); whether the rows were freed, a read says.
    c.reset();  // broken: back to the pool, which closes it and may lend the read a connection
    if (reconcile(name, lost, gone) == Verdict::kApplied) return count;
    return std::nullopt;
  }
}

void Engine::report_row_losses(const std::vector<HeldRow>& rows, const std::vector<Hold>& holds, SteadyTime sent) {
  // Some of the holds were no longer live when the release ran: those whose
  // row another hold took *before* it are reported, told by the new hold's
  // age, which then exceeds the time since the release was sent (a row the
  // release freed may have been taken again since, by a hold younger than
  // that). One freed by a force-unlock looks like one freed here; the
  // watchdog reports those at its next renewal.
  try {
    read([&](Connection& c) {
      for (std::size_t i = 0; i < rows.size(); ++i) {
        const HoldRow now = rows_.read(c, rows[i].key);
        const auto since_sent = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - sent).count();
        if (now.live && now.hold_id != rows[i].hold_id && now.held_for_us && *now.held_for_us > since_sent)
          note_lost(NameKeyView{rows[i].key.kind, rows[i].key.name}, holds[i], "found already lost at unlock", true);
      }
      return 0;
    });
  } catch (const BackendError& e) {
    logger_->warn("dlock: could not tell which of {} released holds were lost: {}", rows.size(), e.what());
  }
}

std::size_t Engine::force_release(NameKeyView key) {
  validate_name(key.name);
  HoldKind& k = kind(key.kind);
  CallBudget budget(options_.io_timeout);
  // Clearing holds is idempotent: a repeat after an unknown outcome clears
  // what is left.
  const std::size_t cleared = read([&](Connection& c) { return k.force(*this, c, key.name); });
  logger_->info("dlock: force-unlock of {} {} by {}: {} hold(s) cleared", kind_name(key.kind), printable(key.name),
                machine_id_, cleared);
  hint_free_if_held_here(key);
  waiters_.wake_all(key);
  wake_other_side(key);
  return cleared;
}

}  // namespace dlock::details
