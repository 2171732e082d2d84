// The engine with every primitive on it: the kinds of hold it runs
// (kinds.hpp), and the per-client objects of the primitives built over
// those holds with verbs of their own (the multi-lock over the lock, the
// election's term, proclaim, resign and observers).
#pragma once

#include <memory>

#include "dlock/options.hpp"
#include "engine/engine.hpp"
#include "primitives/election/elections.hpp"
#include "primitives/multi_lock/multi_locks.hpp"

namespace dlock::details {

struct Primitives {
  explicit Primitives(Engine& engine) : multi_locks(engine, engine.rows()), elections(engine, engine.rows()) {}
  MultiLocks multi_locks;
  Elections elections;
};

// An engine with every kind registered, started (Engine::start).
std::unique_ptr<Engine> make_engine(Options options);

}  // namespace dlock::details
