// Who watches a hold of another client for a kind's waiters
// (wakeup/bell_watcher.hpp), and a fair queue entry's place.
#pragma once

#include <cstddef>
#include <cstdint>

namespace dlock::details {

enum class WakePolicy {
  // Every waiting client watches the blocking holds' bells: a release may
  // let several in (readers, permits), or every one must hear it (an
  // election's observers).
  kEveryone,
  // The waiting clients of a name queue on its line (a user lock: the
  // server grants it first come, first served); the client at the front
  // alone watches the holder's bell, and gives the line back once it has
  // the name. A release wakes one client. (A name with one holder: the
  // lock.)
  kLine,
  // Each waiting client watches the queue entry before its own, and the
  // first one the holder's bell (the fair lock, whose release grants the
  // first entry). A release wakes the client it granted.
  kChain,
};

// A client's place in a fair lock's queue, as its watcher reads it: the
// hold id of its first live entry (0: none left, it was granted or left)
// and of the live entry it waits behind (0: it is first): see chain_target.
// How a park ended (BellWatcher::Hooks::park): a wait for a take that
// rings no bell (an election's observers, while it has no leader).
enum class Parked {
  kNoPlace,      // could not park (the poll covers it)
  kTaken,        // taken before the park was in place: no wait
  kTimedOut,     // waited its longest
  kInterrupted,  // a KILL QUERY ended it: a take's, or the watcher's own
};

struct QueuePlace {
  std::uint64_t mine = 0;
  std::uint64_t before = 0;
};

// Which entry the one at `place` (0: first) waits behind in a kChain
// queue: the one right before it, and further back the one a power of 8
// ahead (place 8-63: 8 ahead; 64-511: 64 ahead ...). The server reports a
// chain of lock waits longer than its deadlock search depth (32) as a
// deadlock, so a queue of a hundred cannot wait entry behind entry; this
// way a chain is at most the sum of place's digits in base 8 long (21 for
// the first 512 places), a release still wakes at most one client per
// power of 8, and a client wakes once per digit while it moves up.
constexpr std::size_t chain_target(std::size_t place) {
  std::size_t step = 1;
  while (step <= place / 8) step *= 8;
  return place - step;
}

// How many waits the entry at `place` is behind the first (the chain's
// length, for the depth bound above).
constexpr std::size_t chain_length(std::size_t place) {
  std::size_t length = 0;
  for (; place > 0; place = chain_target(place)) ++length;
  return length;
}

}  // namespace dlock::details
