// Client's read-write lock half: both sides are acquired by the same engine
// and drivers as mutex holds (attempt_step dispatches here), released by
// Lock::unlock, renewed by the watchdog and polled for by waiters. The
// statements and the rule that keeps reads and writes apart are in
// sql/rw_table.hpp.
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

std::int64_t micros(Millis d) { return std::chrono::duration_cast<Micros>(d).count(); }

// Rounds of an acquire when its rows turn out to be gone (deleted behind the
// client's back) and are made again.
constexpr int kRowRounds = 3;

bool is_write(LockSide side) { return side == LockSide::kWrite; }
LockSide side_of_key(const std::string& key) { return key[1] == 'w' ? LockSide::kWrite : LockSide::kRead; }

}  // namespace

std::string Client::rw_key(LockSide side, std::string_view name) {
  std::string key(1, '\0');
  key.push_back(is_write(side) ? 'w' : 'r');
  key.append(name.data(), name.size());
  return key;
}

void Client::validate_rw() const {
  if (!rw_) RwTable table(options_.table);  // throws std::invalid_argument, naming the table
}

const RwTable& Client::rw_table() {
  validate_rw();
  if (rw_table_ready_.load(std::memory_order_acquire)) return *rw_;
  std::lock_guard<std::mutex> guard(rw_table_mutex_);
  if (!rw_table_ready_.load(std::memory_order_relaxed)) {
    // Made on first use, like the semaphore table.
    CallBudget budget(options_.io_timeout);
    with_connection([&](Connection& c) {
      if (options_.create_table) {
        rw_->create_tables(c);
      } else {
        rw_->check_schema(c);
      }
      return 0;
    });
    rw_table_ready_.store(true, std::memory_order_release);
  }
  return *rw_;
}

std::string Client::rw_bell(LockSide side, std::string_view name, std::uint64_t hold_id) const {
  return doorbell_name(options_.database, options_.table,
                       is_write(side) ? rw_key(side, name) : hold_bell_key('q', name, hold_id));
}

Millis Client::intent_lease() const { return std::max(Millis(1000), options_.poll_interval * 3); }

// ---------------------------------------------------------------- reads of the tables

RwHead Client::read_rw_head(std::string_view name, std::uint32_t slot) {
  const ReaderSlot where{client_key_, slot};
  try {
    return with_connection([&](Connection& c) { return rw_->read_head(c, name, where); });
  } catch (const OutcomeUnknown&) {
    PooledConnection fresh = pool_.acquire_fresh();  // a read: safe to repeat
    return rw_->read_head(*fresh, name, where);
  }
}

LockRow Client::read_rw_hold(LockSide side, std::string_view name, std::uint32_t slot) {
  const auto read = [&](Connection& c) {
    return is_write(side) ? rw_->read_head(c, name).writer : rw_->read_slot(c, name, {client_key_, slot}).hold;
  };
  try {
    return with_connection(read);
  } catch (const OutcomeUnknown&) {
    PooledConnection fresh = pool_.acquire_fresh();
    return read(*fresh);
  }
}

LockRow Client::read_rw_after_unknown(LockSide side, std::string_view name, std::uint32_t slot,
                                      const OutcomeUnknown& cause) {
  logger_->warn("dlock: connection lost mid-statement on read-write lock {}; reading the row to learn the outcome: {}",
                printable(name), cause.what());
  try {
    PooledConnection fresh = pool_.acquire_fresh();
    return is_write(side) ? rw_->read_head(*fresh, name).writer
                          : rw_->read_slot(*fresh, name, {client_key_, slot}).hold;
  } catch (const BackendError& e) {
    throw BackendError(std::string("dlock: outcome unknown (") + cause.what() + "), and the row could not be read: " +
                           e.what(),
                       e.code() != 0 ? e.code() : cause.code(), e.code() != 0 ? e.sql_state() : cause.sql_state());
  }
}

// ---------------------------------------------------------------- acquire

AcquireStep Client::attempt_rw_step(const AcquireRequest& r) {
  rw_table();
  const std::string key = rw_key(r.side, r.name);
  RwHead head;
  {
    // One owner's operations on both sides of a name are serialized: a read
    // acquire looks at the owner's write hold (a downgrade), a write acquire
    // at its read hold (an upgrade).
    std::lock_guard<std::mutex> serial(owner_mutex(rw_key(LockSide::kWrite, r.name), r.owner));
    CallBudget budget(options_.io_timeout);
    bool acquired = reenter_rw(r, key);
    if (!acquired) {
      if (is_write(r.side) && rw_holds_.find(rw_key(LockSide::kRead, r.name), r.owner)) {
        // Checked before any SQL in make_request; again here for an owner
        // that started reading since.
        throw std::logic_error("dlock: the owner holds only the read side of read-write lock \"" + printable(r.name) +
                               "\" and asks for the write side: upgrading is not supported");
      }
      if (is_write(r.side) && !r.single_attempt) {
        // A chain of write handoffs to this client's writers just ended:
        // hold back (no SQL), so a writer in another client gets in.
        if (const Micros left = yields_.left(key); left > Micros::zero()) return wait_step(r, left.count());
      }
      acquired = is_write(r.side) ? take_write(r, key, head) : take_read(r, key, head);
    }
    if (acquired) {
      AcquireStep step;
      step.next = AcquireStep::Next::kAcquired;
      return step;
    }
  }
  if (r.single_attempt) return AcquireStep{};  // kGaveUp
  std::int64_t ttl_us = 0;
  const bool foreign_writer = head.writer.held && !rw_holds_.is_ours(head.writer.hold_id);
  if (is_write(r.side)) {
    // Wait for the writer, else for the reads counted (their longest lease).
    ttl_us = head.writer.held ? head.writer.ttl_us.value_or(0) : head.reads_counted ? head.read_ttl_us : 0;
    if (doorbells_) {
      if (foreign_writer) doorbells_->arm(key);
      // Readers of this client wake its writers themselves when they
      // release; the doorbells are for the others' (the first few to expire).
      std::vector<std::uint64_t> foreign;
      if (!head.writer.held)
        for (auto id : head.first_readers)
          if (!rw_holds_.is_ours(id)) foreign.push_back(id);
      arm_hold_bells('q', r.name, foreign);
    }
  } else if (head.writer.held) {
    // Wait for the writer: at its release (its doorbell), or its lease end.
    ttl_us = head.writer.ttl_us.value_or(0);
    if (doorbells_ && foreign_writer) doorbells_->arm(rw_key(LockSide::kWrite, r.name));
  } else if (head.intent) {
    // Held back by a waiting writer, which takes the lock when the reads
    // counted end: wake when they do (their doorbells), then watch the
    // writer's. With no read counted the writer is taking it right now:
    // look again very soon rather than at the mark's lease end.
    constexpr std::int64_t kWriterTakingUs = 20'000;
    ttl_us = head.reads_counted ? std::min(head.intent_ttl_us, head.read_ttl_us)
                                : std::min<std::int64_t>(head.intent_ttl_us, kWriterTakingUs);
    if (doorbells_) {
      std::vector<std::uint64_t> foreign;
      for (auto id : head.first_readers)
        if (!rw_holds_.is_ours(id)) foreign.push_back(id);
      arm_hold_bells('q', r.name, foreign);
    }
  }
  return wait_step(r, ttl_us);
}

bool Client::reenter_rw(const AcquireRequest& r, const std::string& key) {
  const auto local = rw_holds_.find(key, r.owner);
  if (!local) return false;
  if (local->lost) throw_lost(r.name, local->fence);
  const unsigned next = local->count + 1;
  const std::int64_t lease_us = micros(r.lease);
  const ReaderSlot slot{client_key_, local->slot};
  const auto run = [&] {
    return with_connection([&](Connection& c) {
      return is_write(r.side) ? rw_->retake_write(c, r.name, local->hold_id, next, lease_us, r.watchdog)
                              : rw_->retake_read(c, r.name, slot, local->hold_id, next, lease_us, r.watchdog);
    });
  };
  const auto sent = Clock::now();
  bool renewed = false;
  try {
    renewed = run();
  } catch (const OutcomeUnknown& e) {
    const LockRow row = read_rw_after_unknown(r.side, r.name, local->slot, e);
    // Absolute count: a late first run writes the same values.
    renewed = row.held_by(local->hold_id) && (row.state == next || run());
  }
  if (!renewed) {
    note_rw_lost(key, r.owner, local->generation, "its lease ran out or it was force-unlocked");
    throw_lost(r.name, local->fence);
  }
  if (!rw_holds_.record_reentrant(key, r.owner, local->generation, next, r.watchdog, sent + r.lease)) {
    // Found lost by the watchdog while the statement ran: it stays lost.
    free_rw_quietly(r.side, r.name, local->slot, local->hold_id);
    throw_lost(r.name, local->fence);
  }
  return true;
}

bool Client::take_write(const AcquireRequest& r, const std::string& key, RwHead& head) {
  const Holder holder{machine_id_, r.owner, new_hold_id(), host_, pid_};
  const std::int64_t lease_us = micros(r.lease);
  const std::string bell = options_.fast_wakeup ? rw_bell(LockSide::kWrite, r.name, 0) : std::string();
  const std::string* bell_ptr = options_.fast_wakeup ? &bell : nullptr;
  for (int round = 0; round < kRowRounds; ++round) {
    if (!rw_heads_.contains(r.name)) {
      with_connection([&](Connection& c) {
        rw_->ensure_head(c, r.name);
        return 0;
      });
      rw_heads_.add(r.name);
    }
    std::uint64_t session = 0;
    const auto run = [&] {
      return with_connection([&](Connection& c) {
        session = 0;
        const bool taken = rw_->take_write(c, r.name, holder, 1, lease_us, r.watchdog, client_key_, bell_ptr);
        if (taken && bell_ptr != nullptr) session = c.session_key();
        return taken;
      });
    };
    const auto sent = Clock::now();
    bool taken = false;
    try {
      taken = run();
    } catch (const OutcomeUnknown& e) {
      session = 0;  // the session died, and a doorbell it took went with it
      // The hold id says whether this very statement applied; if not (yet),
      // running it again is safe (a late first run leaves the write held by
      // this id, which the refusal's read below recognises).
      taken = read_rw_after_unknown(LockSide::kWrite, r.name, 0, e).held_by(holder.hold_id) || run();
    }
    if (!taken) {
      // Readers that do not read yet wait behind this writer from now on.
      if (!r.single_attempt) mark_intent(r.name);
      head = read_rw_head(r.name);
      if (!head.writer.exists) {
        rw_heads_.forget(r.name);  // deleted behind our back: make it again
        continue;
      }
      taken = head.writer.held_by(holder.hold_id);
      if (!taken && !head.writer.held && head.reads_counted && head.first_readers.empty() && round == 0) {
        // Reads counted, none live: a crashed reader's count. Forget it
        // (checked under the head's row lock) and try again.
        try {
          const bool reset = with_connection([&](Connection& c) { return rw_->forget_stale_reads(c, r.name); });
          if (reset) logger_->info("dlock: read-write lock {}: forgot a count of reads no live read holds",
                                   printable(r.name));
        } catch (const OutcomeUnknown&) {
          // Whatever it did was safe; the take below finds out.
        }
        continue;
      }
    }
    if (!taken) return false;
    rw_holds_.record_fresh(key, r.owner, holder.hold_id, 1, r.watchdog, sent + r.lease, 0, session);
    {
      // The take cleared this client's mark: nothing left to unmark.
      std::lock_guard<std::mutex> guard(intents_mutex_);
      intents_.erase(r.name);
    }
    if (logger_->should_log(spdlog::level::debug))
      logger_->debug("dlock: write side of {} acquired by {}/{}", printable(r.name), machine_id_, r.owner);
    return true;
  }
  return false;
}

bool Client::take_read(const AcquireRequest& r, const std::string& key, RwHead& head) {
  // The owner's own live write lets the read past it and past any intent
  // (a downgrade).
  const auto write = rw_holds_.find(rw_key(LockSide::kWrite, r.name), r.owner);
  const std::uint64_t write_hold_id = write && !write->lost ? write->hold_id : 0;
  const Holder holder{machine_id_, r.owner, new_hold_id(), host_, pid_};
  const std::int64_t lease_us = micros(r.lease);
  const std::string bell = options_.fast_wakeup ? rw_bell(LockSide::kRead, r.name, holder.hold_id) : std::string();
  const std::string* bell_ptr = options_.fast_wakeup ? &bell : nullptr;
  for (int round = 0; round < kRowRounds; ++round) {
    const ReaderSlots::Slot slot = reader_slots_.allocate(r.name);
    const ReaderSlot where{client_key_, slot.index};
    std::uint64_t session = 0;
    bool taken = false;
    const auto sent = Clock::now();
    try {
      if (!slot.known) {
        with_connection([&](Connection& c) {
          if (!rw_heads_.contains(r.name)) rw_->ensure_head(c, r.name);
          rw_->ensure_slot(c, r.name, where);
          return 0;
        });
        rw_heads_.add(r.name);
        reader_slots_.mark_known(r.name, slot.index);
      }
      const auto run = [&] {
        return with_connection([&](Connection& c) {
          session = 0;
          const bool t =
              rw_->take_read(c, r.name, where, holder, 1, lease_us, r.watchdog, write_hold_id, bell_ptr);
          if (t && bell_ptr != nullptr) session = c.session_key();
          return t;
        });
      };
      bool unknown = false;
      try {
        taken = run();
      } catch (const OutcomeUnknown& e) {
        session = 0;
        unknown = true;
        // The slot is this client's alone: it shows whether this very
        // statement applied. If not (yet), run it again; a late first run
        // and the re-run cannot both take the slot (the second finds it
        // held), and the read below recognises the first.
        taken = read_rw_after_unknown(LockSide::kRead, r.name, slot.index, e).held_by(holder.hold_id) || run();
      }
      if (!taken) {
        head = read_rw_head(r.name, slot.index);
        if (!head.writer.exists || !head.slot_exists) {
          // Deleted behind our back: make them again.
          if (!head.writer.exists) rw_heads_.forget(r.name);
          reader_slots_.forget(r.name, slot.index);
          reader_slots_.release(r.name, slot.index);
          continue;
        }
        if (unknown) taken = read_rw_hold(LockSide::kRead, r.name, slot.index).held_by(holder.hold_id);
      }
    } catch (...) {
      reader_slots_.release(r.name, slot.index);
      throw;
    }
    if (!taken) {
      reader_slots_.release(r.name, slot.index);
      return false;
    }
    rw_holds_.record_fresh(key, r.owner, holder.hold_id, 1, r.watchdog, sent + r.lease, 0, session, slot.index);
    if (logger_->should_log(spdlog::level::debug))
      logger_->debug("dlock: read side of {} acquired by {}/{} (slot {})", printable(r.name), machine_id_, r.owner,
                     slot.index);
    return true;
  }
  return false;
}

// ---------------------------------------------------------------- release

void Client::release_rw(std::string_view name, std::uint64_t owner, LockSide side) {
  validate_name(name);
  validate_rw();
  const std::string key = rw_key(side, name);
  // A local writer claimed for a handoff of the write side: resolved once
  // the release is done and the stripe let go, as in release().
  WaiterRegistry::ClaimedWaiter claim;
  std::lock_guard<std::mutex> serial(owner_mutex(rw_key(LockSide::kWrite, name), owner));
  const std::optional<Hold> before = rw_holds_.take_one(key, owner);
  if (!before) {
    throw NotHeldError("dlock: unlock of the " + std::string(is_write(side) ? "write" : "read") +
                       " side of read-write lock \"" + printable(name) + "\" by an owner (" + std::to_string(owner) +
                       ") that holds no hold on it in this client");
  }
  const unsigned target = before->count - 1;
  if (before->lost) {
    logger_->debug("dlock: unlock of lost hold on read-write lock {} (count {} left)", printable(name), target);
    if (target == 0 && !is_write(side)) {
      // Free the slot, and uncount the read if no write has since.
      free_rw_quietly(side, name, before->slot, before->hold_id);
      reader_slots_.release(name, before->slot);
    }
    return;
  }
  CallBudget budget(options_.io_timeout);
  const std::uint64_t hold_id = before->hold_id;
  const ReaderSlot slot{client_key_, before->slot};
  const auto release = [&](Connection& c, const std::string* bell) {
    return is_write(side) ? rw_->release_write(c, name, hold_id, target, bell)
                          : rw_->release_read(c, name, slot, hold_id, target, bell);
  };
  if (target == 0 && is_write(side)) claim_for_handoff(key, before->chain_started, claim);
  bool released = false;
  try {
    if (claim.waiter) {
      switch (hand_over_write(name, owner, *before, claim.waiter)) {
        case Handoff::kHanded:
          claim.grant();  // it holds the write side; readers still wait
          return;
        case Handoff::kLost:
          return;  // the claim's wake lets the waiter try the head
        case Handoff::kDeclined:
          break;
      }
    }
    try {
      if (target == 0) {
        const std::string bell = before->doorbell_session != 0 ? rw_bell(side, name, hold_id) : std::string();
        released = release_ringing(before->doorbell_session, bell, release);
      } else {
        released = with_connection([&](Connection& c) { return release(c, nullptr); });
      }
    } catch (const OutcomeUnknown& e) {
      const LockRow row = read_rw_after_unknown(side, name, before->slot, e);
      // Not held by this hold any more: the release applied (or the hold
      // was lost at the same moment). Held with the target count: applied.
      // Else it did not, and writing the same count again is safe.
      released = !row.held_by(hold_id) || row.state == target ||
                 with_connection([&](Connection& c) { return release(c, nullptr); });
    }
  } catch (const BackendError& e) {
    // The slot stays in use here until the process ends: its row may still
    // carry the hold until the lease runs out.
    logger_->error("dlock: could not release read-write lock {}; it stays locked until its lease expires: {}",
                   printable(name), e.what());
    return;
  }
  if (target == 0 && !is_write(side)) reader_slots_.release(name, before->slot);
  if (!released) {
    if (target == 0) {
      report_lost(name, before->fence, "found already lost at unlock");
    } else {
      note_rw_lost(key, owner, before->generation, "found already lost at unlock");
    }
    return;
  }
  if (logger_->should_log(spdlog::level::debug))
    logger_->debug("dlock: {} side of {} released by {}/{} (count {})", is_write(side) ? "write" : "read",
                   printable(name), machine_id_, owner, target);
  if (target == 0) {
    if (is_write(side)) waiters_.wake_all(rw_key(LockSide::kRead, name));
    // A claimed writer's wake is the claim's resolution.
    if (!claim.waiter) waiters_.wake_one(rw_key(LockSide::kWrite, name));
  }
}

Client::Handoff Client::hand_over_write(std::string_view name, std::uint64_t owner, const Hold& before,
                                        const std::shared_ptr<WaiterRegistry::Parked>& claimed) {
  // The request stays valid until the claim is resolved: its waiter waits.
  const AcquireRequest* request = claimed->handoff_request();
  if (request == nullptr || request->side != LockSide::kWrite) return Handoff::kDeclined;
  if (!request->forever && Clock::now() >= request->deadline) return Handoff::kDeclined;
  // The new write is the waiter's owner's: serialize with that owner's
  // operations on either side of the name, never waiting (see hand_over).
  const std::string stripe = rw_key(LockSide::kWrite, name);
  std::mutex& theirs = owner_mutex(stripe, request->owner);
  std::unique_lock<std::mutex> serial(theirs, std::defer_lock);
  if (&theirs != &owner_mutex(stripe, owner) && !serial.try_lock()) return Handoff::kDeclined;
  // A write it still owes unlock() for (a lost one), or a read of its own
  // (asking to upgrade, which its own attempt refuses): not handed.
  if (rw_holds_.find(stripe, request->owner) || rw_holds_.find(rw_key(LockSide::kRead, name), request->owner))
    return Handoff::kDeclined;

  const std::uint64_t to = new_hold_id();
  const std::int64_t lease_us = micros(request->lease);
  const auto run = [&] {
    return with_connection([&](Connection& c) {
      return rw_->hand_over_write(c, name, before.hold_id, to, request->owner, lease_us, request->watchdog,
                                  client_key_);
    });
  };
  const std::string bell = before.doorbell_session != 0 ? rw_bell(LockSide::kWrite, name, 0) : std::string();
  auto sent = Clock::now();
  bool handed = false;
  bool lost = false;
  try {
    try {
      handed = run();
    } catch (const OutcomeUnknown& e) {
      const LockRow row = read_rw_after_unknown(LockSide::kWrite, name, 0, e);
      if (row.held_by(to)) {
        handed = true;
      } else if (row.held_by(before.hold_id)) {
        sent = Clock::now();
        handed = run();  // matches the old write or its own late first run, bumping the fence once
      } else {
        lost = true;
      }
    }
    if (!handed && !lost) {
      // Refused: the old write is no longer live (lost), or a read is
      // counted (a read this owner took under its write). Only the first
      // releases as usual.
      lost = !read_rw_head(name).writer.held_by(before.hold_id);
    }
  } catch (const BackendError&) {
    // The old write stays until its lease ends (as after a failed release);
    // its doorbell must not stay with it.
    if (before.doorbell_session != 0) drop_bell_when_idle(bell, before.doorbell_session);
    throw;
  }
  if (!handed) {
    if (!lost) return Handoff::kDeclined;
    if (before.doorbell_session != 0) drop_bell_when_idle(bell, before.doorbell_session);
    report_lost(name, before.fence, "found already lost at unlock (handing it over)");
    return Handoff::kLost;
  }
  rw_holds_.record_fresh(stripe, request->owner, to, 1, request->watchdog, sent + request->lease, 0,
                         before.doorbell_session, 0, before.chain_started == SteadyTime{} ? sent : before.chain_started);
  {
    // The statement cleared this client's mark: nothing left to unmark
    // (writers still waiting here mark again when next refused).
    std::lock_guard<std::mutex> guard(intents_mutex_);
    intents_.erase(std::string(name));
  }
  handoffs_.fetch_add(1, std::memory_order_relaxed);
  if (logger_->should_log(spdlog::level::debug))
    logger_->debug("dlock: write side of {} handed over by {}/{} to {}", printable(name), machine_id_, owner,
                   request->owner);
  return Handoff::kHanded;
}

void Client::free_rw_quietly(LockSide side, std::string_view name, std::uint32_t slot, std::uint64_t hold_id) {
  try {
    CallBudget budget(options_.io_timeout);
    with_connection([&](Connection& c) {
      return is_write(side) ? rw_->release_write(c, name, hold_id, 0)
                            : rw_->release_read(c, name, {client_key_, slot}, hold_id, 0);
    });
  } catch (const BackendError& e) {
    logger_->warn("dlock: could not free a lost hold on read-write lock {}; it expires with its lease: {}",
                  printable(name), e.what());
  }
}

void Client::note_rw_lost(const std::string& key, std::uint64_t owner, std::uint64_t generation, const char* why) {
  auto hold = rw_holds_.mark_lost(key, owner, generation);
  if (!hold) return;
  const std::string name = key.substr(2);
  // A lost hold keeps no doorbell (see note_lost).
  if (hold->doorbell_session != 0)
    drop_bell_when_idle(rw_bell(side_of_key(key), name, hold->hold_id), hold->doorbell_session);
  report_lost(name, hold->fence, why);
}

bool Client::force_release_rw(std::string_view name, LockSide side) {
  rw_table();
  CallBudget budget(options_.io_timeout);
  bool cleared = false;
  if (is_write(side)) {
    try {
      cleared = with_connection([&](Connection& c) { return rw_->force_write(c, name); });
    } catch (const OutcomeUnknown& e) {
      const LockRow row = read_rw_after_unknown(side, name, 0, e);
      cleared = !row.held || with_connection([&](Connection& c) { return rw_->force_write(c, name); });
    }
    waiters_.wake_all(rw_key(LockSide::kRead, name));
  } else {
    // Clearing reads is idempotent: a repeat after an unknown outcome
    // clears what is left.
    try {
      cleared = with_connection([&](Connection& c) { return rw_->force_reads(c, name); }) > 0;
    } catch (const OutcomeUnknown&) {
      PooledConnection fresh = pool_.acquire_fresh();
      cleared = rw_->force_reads(*fresh, name) > 0;
    }
  }
  logger_->info("dlock: force-unlock of the {} side of read-write lock {} by {}: {}",
                is_write(side) ? "write" : "read", printable(name), machine_id_,
                cleared ? "cleared holds" : "was not held");
  waiters_.wake_one(rw_key(LockSide::kWrite, name));
  return cleared;
}

// ---------------------------------------------------------------- intents

void Client::mark_intent(std::string_view name) {
  std::lock_guard<std::mutex> marking(intent_statements_mutex_);
  {
    // Marked already: the poller keeps the mark alive while a writer here
    // waits (and a take of the write side here clears it from the set).
    std::lock_guard<std::mutex> guard(intents_mutex_);
    if (intents_.count(std::string(name)) != 0) return;
  }
  try {
    with_connection([&](Connection& c) {
      rw_->set_intent(c, name, client_key_, micros(intent_lease()));
      return 0;
    });
    std::lock_guard<std::mutex> guard(intents_mutex_);
    intents_.emplace(name);
  } catch (const BackendError& e) {
    // Fairness only: the next refused attempt marks it again.
    logger_->debug("dlock: could not mark a waiting writer on {}: {}", printable(name), e.what());
  }
}

void Client::unmark_intent(const std::string& name) {
  {
    std::lock_guard<std::mutex> marking(intent_statements_mutex_);
    {
      std::lock_guard<std::mutex> guard(intents_mutex_);
      if (intents_.erase(name) == 0) return;
    }
    clear_intent_statement(name);
  }
  // Readers held back by it may go now.
  waiters_.wake_all(rw_key(LockSide::kRead, name));
}

void Client::clear_intent_statement(const std::string& name) {
  try {
    CallBudget budget(options_.io_timeout);
    with_connection([&](Connection& c) {
      rw_->clear_intent(c, name, client_key_);
      return 0;
    });
  } catch (const std::exception& e) {
    // The mark ends with its lease (3 poll intervals).
    logger_->debug("dlock: could not clear the waiting-writer mark on {}: {}", printable(name), e.what());
  }
}

// ---------------------------------------------------------------- introspection

std::optional<Hold> Client::confirmed_rw_hold(LockSide side, std::string_view name, std::uint64_t owner,
                                              LockRow* row_out) {
  validate_rw();
  const std::string key = rw_key(side, name);
  const auto hold = rw_holds_.find(key, owner);
  if (!hold || hold->lost || Clock::now() >= hold->deadline) return std::nullopt;
  CallBudget budget(options_.io_timeout);
  const LockRow row = read_rw_hold(side, name, hold->slot);
  if (!row.held_by(hold->hold_id)) {
    note_rw_lost(key, owner, hold->generation, "the row shows another owner or none");
    return std::nullopt;
  }
  if (row_out != nullptr) *row_out = row;
  return hold;
}

bool Client::rw_is_locked(std::string_view name, LockSide side) {
  rw_table();
  CallBudget budget(options_.io_timeout);
  if (is_write(side)) return read_rw_head(name).writer.held;
  return !with_connection([&](Connection& c) { return rw_->live_readers(c, name); }).empty();
}

std::optional<Millis> Client::rw_remaining_ttl(std::string_view name, LockSide side) {
  rw_table();
  CallBudget budget(options_.io_timeout);
  std::optional<std::int64_t> ttl_us;
  if (is_write(side)) {
    const RwHead head = read_rw_head(name);
    if (head.writer.held) ttl_us = head.writer.ttl_us.value_or(0);
  } else {
    const auto readers = with_connection([&](Connection& c) { return rw_->live_readers(c, name); });
    if (!readers.empty()) ttl_us = readers.front().hold.ttl_us.value_or(0);  // longest lease first
  }
  if (!ttl_us) return std::nullopt;
  return Millis(std::max<std::int64_t>(0, *ttl_us / 1000));
}

std::uint64_t Client::rw_fencing_token(std::string_view name, std::uint64_t owner, LockSide side) {
  validate_rw();
  const std::string key = rw_key(side, name);
  const auto hold = rw_holds_.find(key, owner);
  if (!hold || hold->lost || Clock::now() >= hold->deadline) return 0;
  if (hold->fence != 0) return hold->fence;
  LockRow row;
  const auto confirmed = confirmed_rw_hold(side, name, owner, &row);
  if (!confirmed) return 0;
  rw_holds_.set_fence(key, owner, confirmed->generation, row.fence);
  return row.fence;
}

std::vector<RwHead> Client::held_rw_heads() {
  const RwTable& table = rw_table();
  CallBudget budget(options_.io_timeout);
  return with_connection([&](Connection& c) { return table.read_held_heads(c); });
}

std::vector<ReaderRow> Client::held_reads() {
  const RwTable& table = rw_table();
  CallBudget budget(options_.io_timeout);
  return with_connection([&](Connection& c) { return table.read_held_readers(c); });
}

// ---------------------------------------------------------------- background

void Client::renew_rw_tick(const IoThread::ConnectionSource& connection) {
  auto refs = rw_holds_.watchdog_holds();
  if (refs.empty()) return;
  CallBudget budget(std::min(options_.io_timeout, renew_period()));
  const auto now = Clock::now();
  std::vector<HoldRef> writes;
  std::vector<HoldRef> reads;
  for (auto& ref : refs) {
    if (ref.deadline <= now) {
      note_rw_lost(ref.name, ref.owner, ref.generation, "renewal failed past the lease");
    } else {
      (side_of_key(ref.name) == LockSide::kWrite ? writes : reads).push_back(std::move(ref));
    }
  }
  const std::int64_t lease_us = micros(options_.watchdog_timeout);
  // One statement for every hold of a side; when it renews fewer rows than
  // expected, read which holds are still live (renewed) and which are lost.
  const auto renew = [&](std::vector<HoldRef>& holds, LockSide side) {
    if (holds.empty()) return;
    std::vector<std::uint64_t> ids;
    std::unordered_set<std::string> names;
    for (const auto& h : holds) {
      ids.push_back(h.hold_id);
      names.insert(h.name);
    }
    const auto run = [&] {
      return is_write(side) ? rw_->renew_writes(connection(), ids, lease_us) : rw_->renew_reads(connection(), ids, lease_us);
    };
    auto sent = Clock::now();
    std::size_t affected = 0;
    try {
      affected = run();
    } catch (const OutcomeUnknown&) {
      // Extends only live holds of this client: safe to run again.
      sent = Clock::now();
      affected = run();
    }
    // A read renewal also counts each head row whose read_expire moved.
    const std::size_t expected = is_write(side) ? ids.size() : ids.size() + names.size();
    if (affected >= expected) {
      rw_holds_.extend(holds, sent + options_.watchdog_timeout);
      return;
    }
    const auto live =
        is_write(side) ? rw_->live_writes_among(connection(), ids) : rw_->live_reads_among(connection(), ids);
    const std::unordered_set<std::uint64_t> live_set(live.begin(), live.end());
    std::vector<HoldRef> renewed;
    for (auto& h : holds) {
      if (live_set.count(h.hold_id) != 0) {
        renewed.push_back(h);
      } else {
        note_rw_lost(h.name, h.owner, h.generation, "the watchdog found it expired or force-unlocked");
      }
    }
    rw_holds_.extend(renewed, sent + options_.watchdog_timeout);
  };
  renew(writes, LockSide::kWrite);
  renew(reads, LockSide::kRead);
}

void Client::poll_rw_tick(const IoThread::ConnectionSource& connection) {
  std::vector<std::string> names;
  std::vector<std::string> writers_waiting;
  for (const auto& key : waiters_.names()) {
    if (!is_rw_key(key)) continue;
    const std::string name = key.substr(2);
    if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
    if (key[1] == 'w') writers_waiting.push_back(name);
  }
  if (names.empty() || !rw_) return;
  CallBudget budget(options_.io_timeout);
  // Keep this client's waiting writers' marks alive (and take over marks
  // whose clients stopped renewing them): one statement for all, decided
  // and run under intent_statements_mutex_, so no unmark falls between.
  if (!writers_waiting.empty()) {
    std::lock_guard<std::mutex> marking(intent_statements_mutex_);
    {
      std::lock_guard<std::mutex> guard(intents_mutex_);
      writers_waiting.erase(std::remove_if(writers_waiting.begin(), writers_waiting.end(),
                                           [&](const std::string& name) { return intents_.count(name) == 0; }),
                            writers_waiting.end());
    }
    if (!writers_waiting.empty()) {
      try {
        rw_->set_intents(connection(), writers_waiting, client_key_, micros(intent_lease()));
      } catch (const OutcomeUnknown&) {
        rw_->set_intents(connection(), writers_waiting, client_key_, micros(intent_lease()));  // idempotent
      }
      // A take of the write side here clears its mark in its own statement
      // and then forgets the name (without this mutex): one that came
      // between the look and the renewal is cleared again.
      std::vector<std::string> taken;
      {
        std::lock_guard<std::mutex> guard(intents_mutex_);
        for (const auto& name : writers_waiting)
          if (intents_.count(name) == 0) taken.push_back(name);
      }
      for (const auto& name : taken) clear_intent_statement(name);
    }
  }
  std::vector<RwPoll> polls;
  try {
    polls = rw_->poll(connection(), names);
  } catch (const OutcomeUnknown&) {
    polls = rw_->poll(connection(), names);  // a read: safe to repeat
  }
  for (const auto& p : polls) {
    if (p.write_free && p.intent_free) waiters_.wake_all(rw_key(LockSide::kRead, p.name));
    if (p.write_free && p.reads_free) waiters_.wake_one(rw_key(LockSide::kWrite, p.name));
  }
}

void Client::release_rw_at_shutdown() {
  if (!rw_ || !rw_table_ready_.load()) return;
  const auto holds = rw_holds_.live();
  std::vector<std::string> intents;
  {
    std::lock_guard<std::mutex> guard(intents_mutex_);
    intents.assign(intents_.begin(), intents_.end());
    intents_.clear();
  }
  try {
    CallBudget budget(options_.io_timeout);
    with_connection([&](Connection& c) {
      // One statement per hold: a statement that frees several read holds
      // of one name would uncount only one of them.
      for (const auto& h : holds) {
        if (side_of_key(h.name) == LockSide::kWrite) {
          rw_->free_write_by_id(c, h.hold_id);
        } else {
          rw_->free_read_by_id(c, h.hold_id);
        }
      }
      for (const auto& name : intents) rw_->clear_intent(c, name, client_key_);
      rw_->delete_slots(c, client_key_);
      return 0;
    });
    if (!holds.empty())
      logger_->debug("dlock: client {} released {} read-write hold(s) at shutdown", machine_id_, holds.size());
  } catch (const std::exception& e) {
    logger_->warn("dlock: client {} could not release its read-write holds at shutdown; they expire with their "
                  "leases: {}",
                  machine_id_, e.what());
  }
}

}  // namespace dlock::details
