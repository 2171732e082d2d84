#include "primitives/primitives.hpp"

#include "primitives/kinds.hpp"

namespace dlock::details {

std::unique_ptr<Engine> make_engine(Options options) {
  auto engine = std::make_unique<Engine>(std::move(options));
  engine->add_kind(make_lock_kind(engine->rows()));
  engine->add_kind(make_semaphore_kind(engine->rows()));
  engine->add_kind(make_fair_kind(engine->rows()));
  engine->add_kind(make_election_kind(engine->rows()));
  auto rw = make_read_write_kinds(engine->rows());
  engine->add_kind(std::move(rw.write));
  engine->add_kind(std::move(rw.read));
  engine->start();
  return engine;
}

}  // namespace dlock::details
