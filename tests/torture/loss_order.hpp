// The loss-order check: the owner of a hold must count it lost (its client
// calls on_lock_lost) before the hold is granted to another owner. A grant
// of a name to another owner while an earlier owner still counted its
// conflicting hold live is a violation.
//
// What it reads: each worker's holds (when its acquire returned), when it
// let each go (when it called unlock), and when its client told it a hold
// was lost (on_lock_lost: name and fence, per process), plus when a worker
// process could not count at all (stopped by SIGSTOP, or killed): a grant
// while an earlier holder's process was stopped or dead is excused, since
// no process can be told anything while it does not run.
//
// Names are resources: a lock name, "s<slot>" for a permit's slot, "rw" for
// both sides of the read-write lock (a read hold is shared: it conflicts
// with writes only). A permit's loss names the semaphore, not the slot
// ("sem" with fence 0): it ends every permit the process held then.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dlock::torture {

struct HoldEvent {
  enum class Type { kHeld, kLetGo, kLost };
  Type type = Type::kHeld;
  std::string process;  // the worker incarnation ("w3-1"): losses are told per process
  std::string owner;    // kHeld, kLetGo: the owner within it ("w3-1:2")
  std::string name;
  std::uint64_t fence = 0;
  bool shared = false;  // kHeld: a read hold
  std::int64_t at_us = 0;
};

// A process that could not count from `from_us` to `to_us` (stopped), or
// from `from_us` on (killed: `to_us` is INT64_MAX).
struct Stopped {
  std::string process;
  std::int64_t from_us = 0;
  std::int64_t to_us = 0;
};

struct LossOrderResult {
  long holds = 0;       // holds checked
  long told_lost = 0;   // of them, ended by a loss the process was told of
  long violations = 0;
  std::vector<std::string> examples;  // the first few violations, described
};

// Parses one history line: "held NAME FENCE x|s OWNER T", "letgo NAME FENCE
// OWNER T" (OWNER: PROCESS:TAG), "lost NAME FENCE PROCESS T"; false for any
// other line.
bool parse_hold_event(const std::string& line, HoldEvent& out);
LossOrderResult check_loss_order(std::vector<HoldEvent> events, const std::vector<Stopped>& stopped,
                                 std::size_t max_examples = 20);

}  // namespace dlock::torture
