// Who watches a hold of another client for a kind's waiters
// (wakeup/bell_watcher.hpp), and a fair queue entry's place.
#pragma once

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
// and of the live entry right before that one (0: it is first).
struct QueuePlace {
  std::uint64_t mine = 0;
  std::uint64_t before = 0;
};

}  // namespace dlock::details
