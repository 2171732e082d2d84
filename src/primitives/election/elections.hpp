// The election's verbs beyond a lock (Election): the leadership is an
// ordinary hold of Kind::kElection on the engine (election_kind.cpp), taken
// by drive() like any other; this adds the term read after a campaign,
// proclaim, resign, and observers, who wait for the election's view
// revision (primitives/election/election_rows.hpp) to pass the one they saw
// (elections.cpp says how they hear of a change).
//
// Thread safety: every member is safe to call concurrently.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/string_map.hpp"
#include "dlock/asio.hpp"
#include "engine/engine.hpp"
#include "engine/wait.hpp"
#include "primitives/election/election_rows.hpp"

namespace dlock::details {

// Observing an election: the row once its view revision is above `after`.
struct ObserveRequest : WaitRule {
  std::string name;
  std::uint64_t owner = 0;  // for cancel(owner)
  std::uint64_t after = 0;
};

struct ObserveStep {
  std::optional<ElectionRow> row;  // set: done (the view is past `after`)
  AcquireStep step;                // else kGaveUp or kWait
};

class Elections {
 public:
  Elections(Engine& engine, const HoldRows& rows) : engine_(engine), rows_(rows) {}
  Elections(const Elections&) = delete;
  Elections& operator=(const Elections&) = delete;

  Engine& engine() { return engine_; }
  // The term of `request.owner`'s leadership: one it has already (no count
  // up), else acquires as Engine::drive does (the take writes
  // request.value) and reads the new term. nullopt: gave up. Throws what
  // drive() throws, std::invalid_argument for a value over
  // kMaxElectionValue.
  std::optional<std::uint64_t> campaign(const AcquireRequest& request, const std::atomic<bool>* interrupted = nullptr);
  // The term of `owner`'s live leadership of `name` here; nullopt when it
  // holds none (a lost one throws LockLostError). No SQL once the term is known.
  std::optional<std::uint64_t> leading_term(std::string_view name, std::uint64_t owner);
  // The term once an acquire of a campaign succeeded; a term that cannot be
  // read ends the leadership again (resign) and throws.
  std::uint64_t term_after_campaign(std::string_view name, std::uint64_t owner);
  // `owner`'s leadership proclaims `value` (validated: up to
  // kMaxElectionValue bytes). NotHeldError (before any SQL) when it leads
  // nothing here; LockLostError when its leadership was lost.
  void proclaim(std::string_view name, std::uint64_t owner, std::string_view value);
  // Ends `owner`'s leadership of `name` (every count of it), if any. Never
  // throws for database trouble (logged: the lease ends it).
  void resign(std::string_view name, std::uint64_t owner);
  // The election's row (one read).
  ElectionRow row(std::string_view name);

  // Observers. One look (observe_step) says what to do next, as
  // Engine::attempt_step does; an ObserveWait watches (Kind::kElection,
  // name) from before its first look. observe() waits for one
  // (Engine::wait; nullopt: `wait` passed, or `interrupted`).
  ObserveRequest make_observe_request(std::string_view name, std::uint64_t owner, std::uint64_t after,
                                      std::optional<Millis> wait) const;
  ObserveStep observe_step(const ObserveRequest& request);
  std::optional<ElectionRow> observe(const ObserveRequest& request, const std::atomic<bool>* interrupted = nullptr);
  static NameKey key(std::string_view name) { return NameKey(Kind::kElection, name); }

 private:
  // How long this client's observers have seen election `name` without a
  // leader at view revision `revision` (0 the first time).
  std::chrono::microseconds leaderless_for(std::string_view name, std::uint64_t revision);

  Engine& engine_;
  const ElectionRows rows_;
  // Elections this client's observers found without a leader: the view
  // revision and when it was first seen.
  std::mutex leaderless_mutex_;
  StringMap<std::pair<std::uint64_t, SteadyTime>> leaderless_seen_;
};

// An observer's Wait: a watcher of the election's name; done with the row.
class ObserveWait final : public Wait {
 public:
  ObserveWait(Elections& elections, ObserveRequest request)
      : Wait(Listen::kWatch, request_, request.owner, std::nullopt, "dlock: observing the election was cancelled"),
        elections_(elections),
        request_(std::move(request)) {}
  AcquireStep step() override;
  std::vector<NameKey> keys() const override { return {Elections::key(request_.name)}; }
  std::uint64_t deliver(asio_impl::AsyncCompletion& completion) override;  // the view, and 1
  // The row, once done.
  std::optional<ElectionRow>& row() { return row_; }

 private:
  Elections& elections_;
  const ObserveRequest request_;
  std::optional<ElectionRow> row_;
};

}  // namespace dlock::details
