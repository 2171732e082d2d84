// One acquire call of a hold (a lock, a side, a permit, a leadership) as
// the engine sees it, and its Wait (engine/wait.hpp): the step is one
// Engine::attempt_step, and it listens as a taker of its key.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "base/keys.hpp"
#include "dlock/options.hpp"
#include "engine/wait.hpp"

namespace dlock::details {

class Engine;

struct AcquireRequest : WaitRule {
  NameKey key;              // the kind and name of the hold (and of its waiters)
  std::uint64_t owner = 0;  // an Owner id, never 0 (a permit gets an owner of its own)
  std::uint32_t bound = 0;  // a semaphore's bound
  Millis lease{0};          // watchdog_timeout in watchdog mode
  bool watchdog = true;
  std::string value;  // an election's: what its take proclaims
};

class AcquireWait : public Wait {
 public:
  // `request` must outlive the wait.
  AcquireWait(Engine& engine, const AcquireRequest& request);

  AcquireStep step() override;
  std::vector<NameKey> keys() const override { return {request_.key}; }
  void started() override;
  // The engine's waiting_ended once it was refused or listened (it disarms
  // what a refusal armed), then the kind's request_ended.
  void ended(bool done) override;
  const void* handoff_request() const override;

 private:
  Engine& engine_;
  const AcquireRequest& request_;
  bool waited_ = false;
};

// An AcquireWait that keeps its request (the asynchronous driver's).
struct KeptRequest {
  AcquireRequest kept;
};
class OwnedAcquireWait : private KeptRequest, public AcquireWait {
 public:
  OwnedAcquireWait(Engine& engine, AcquireRequest request)
      : KeptRequest{std::move(request)}, AcquireWait(engine, kept) {}
};

}  // namespace dlock::details
