// The kinds of hold the engine runs (engine/hold_kind.hpp): each one's
// statements and its rule of who may have it.
#pragma once

#include <memory>

#include "dlock/options.hpp"
#include "engine/hold_kind.hpp"

namespace dlock::details {

// The reentrant lock (get_lock): one row per name, one holder at a time.
std::unique_ptr<HoldKind> make_lock_kind(const HoldRows& rows);
// The election (get_election): the lock's hold on its own row, whose take
// also writes the leader's value and a new revision (primitives/election/election_rows.hpp).
std::unique_ptr<HoldKind> make_election_kind(const HoldRows& rows);
// The semaphore (get_semaphore): one row per slot 0 .. bound-1, one permit
// each, so "at most bound at once" is the primary key's doing.
std::unique_ptr<HoldKind> make_semaphore_kind(const HoldRows& rows);
// The fair lock (get_fair_lock): the lock's hold row, plus a queue of
// waiters in the database that a release grants to in its own statement.
std::unique_ptr<HoldKind> make_fair_kind(const HoldRows& rows);
// The two sides of the read-write lock (get_read_write_lock): the head row
// carries the write hold and whether a read was taken since the last
// write; each read hold is a slot row of its client (base/kinds_table.hpp).
struct ReadWriteKinds {
  std::unique_ptr<HoldKind> write;
  std::unique_ptr<HoldKind> read;
};
ReadWriteKinds make_read_write_kinds(const HoldRows& rows);
// How long a read hold's slot row stays after its lease ended before any
// client may delete it (the rows of clients that died); default 1 hour.
void keep_reader_rows_for(KindContext& engine, Millis kept);

}  // namespace dlock::details
