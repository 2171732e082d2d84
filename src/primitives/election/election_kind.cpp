// The election's kind: the lock's hold (primitives/lock/lock_kind.hpp) on
// its own row (6, name, 0), whose take also writes the candidate's value
// and adds one to the election's revision (election_rows.hpp), in the
// same statement. A release never hands leadership straight to a local
// candidate (the candidate's own take writes its value); every observer
// hears each take and release here (takes_are_news, kEveryone), and the
// poller tells observers when the election's view changed. While it has no
// leader, observers elsewhere park a bell connection until the next take
// interrupts it (park; the protocol is in election_rows.hpp).
#include <spdlog/spdlog.h>

#include "base/identity.hpp"
#include "base/printable.hpp"
#include "engine/kind_context.hpp"
#include "primitives/kinds.hpp"
#include "primitives/lock/lock_kind.hpp"
#include "primitives/election/election_rows.hpp"
#include "sql/bells.hpp"

namespace dlock::details {

namespace {

HoldKind::Traits election_traits() {
  HoldKind::Traits t = LockKind::lock_traits(Kind::kElection);
  t.hands_over = false;
  t.takes_are_news = true;
  t.wake = WakePolicy::kEveryone;  // observers must all hear each take and release
  return t;
}

LockKind::Columns election_columns() {
  LockKind::Columns c;
  c.take = ElectionRows::take_assignments();
  c.upsert = {{"revision", "1", "revision + 1"}, {"value", "?", "?"}};
  return c;
}

class ElectionKind final : public LockKind {
 public:
  explicit ElectionKind(const HoldRows& rows)
      : LockKind(rows, election_traits(), election_columns()), elections_(rows) {}

 protected:
  // The read every campaign makes anyway for its term, which also finds the
  // observers parked on the election while it had no leader: they are
  // woken off this thread. The take stands whatever this read meets.
  void taken(KindContext& e, std::string_view name, std::uint64_t hold_id, Taken& t) override {
    try {
      AfterElectionTake after =
          e.read([&](Connection& c) { return elections_.read_after_take(c, name, hold_id); });
      if (after.held && t.fence == 0) t.fence = after.fence;
      if (!after.observers.empty()) wake_parked_observers(e, std::string(name), std::move(after.observers));
    } catch (const std::exception& ex) {
      e.logger()->debug("dlock: election {}: reading its observers after a take failed: {}", printable(name),
                        ex.what());
    }
  }

  // Observers hear of every change of the view (a proclaim, a new leader, a
  // lease that ran out) at the poll at the latest; of a row not seen at the
  // previous poll too (an observer looks again: the row may have changed
  // since it looked).
  void polled(KindContext& e, std::string_view name, bool live, std::uint64_t revision) override {
    const std::uint64_t view = 2 * revision + (live ? 0 : 1);
    const auto before = polled_views_.find(name);
    if (before == polled_views_.end() || before->second != view)
      e.waiters().tell_watchers(NameKeyView{traits.kind, name});
    views_.insert_or_assign(std::string(name), view);
  }

  void poll_ended() override {
    polled_views_ = std::move(views_);
    views_.clear();
  }

  // Takes a lock of its own on `c`, says so in the election's observer row,
  // reads the election once more (a take that came first is seen here), and
  // sleeps until a take's KILL QUERY (taken(), above) or `seconds`.
  std::optional<Parked> park(KindContext& e, Connection& c, std::string_view name, int seconds,
                             const std::function<bool()>& still_free) override {
    ParkedObserver me;
    me.slot = e.client_key();
    me.token = new_hold_id();
    me.lock = observer_lock_name(me.token);
    if (!take_lock_now(c, me.lock, e.logger())) return Parked::kNoPlace;  // taken elsewhere
    Parked how = Parked::kTaken;
    try {
      // The row's end is a little after the sleep's, so a taker never
      // overlooks a row whose wait still runs.
      elections_.park_observer(c, name, me, seconds + 2);
      if (still_free()) {
        how = park_until_interrupted(c, me.lock, seconds, e.logger()) == ParkedWait::kTimedOut ? Parked::kTimedOut
                                                                                               : Parked::kInterrupted;
      }
      // No row outlives its wait here (a dead client's rows go with the next take).
      elections_.unpark_observers(c, name, {me});
    } catch (...) {
      c.mark_broken();  // closing it gives the lock back
      throw;
    }
    give_back_lock(c, me.lock, e.logger());
    return how;
  }

 private:
  // Interrupts the parked observers' waits and removes their rows, on the
  // io thread.
  void wake_parked_observers(KindContext& e, std::string name, std::vector<ParkedObserver> parked) {
    e.post_io("waking parked observers", [&e, this, name = std::move(name), parked = std::move(parked)](
                                             const IoThread::ConnectionSource& connection) {
      for (const auto& p : parked) {
        if (!p.live) continue;
        try {
          interrupt_parked_wait(connection(), p.lock);
        } catch (const BackendError& ex) {
          // That observer hears it at its poll; the others still get theirs.
          e.logger()->debug("dlock: election {}: waking a parked observer failed: {}", printable(name), ex.what());
        }
      }
      // Live ones were woken; the others' clients died waiting.
      elections_.unpark_observers(connection(), name, parked);
    });
  }

  const ElectionRows elections_;
  StringMap<std::uint64_t> polled_views_;  // each polled election's view at the last poll (io thread)
  StringMap<std::uint64_t> views_;         // the same, gathered by the poll under way
};

}  // namespace

std::unique_ptr<HoldKind> make_election_kind(const HoldRows& rows) { return std::make_unique<ElectionKind>(rows); }

}  // namespace dlock::details
