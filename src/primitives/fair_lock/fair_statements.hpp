// The statements of the fair lock (primitives/fair_lock/fair.cpp), over the one lock
// table: the head (5, name, 0) holds the hold, the entries (5, name,
// slot > 0) are the queue. Bound by the kind next to where it runs them.
#pragma once

#include <cstdint>
#include <string>

#include "sql/hold_rows.hpp"

namespace dlock::details {

// A date long past: a moved-away lease or intent.
inline constexpr const char* kFairPast = "'1970-01-02 00:00:00'";

struct FairStatements {
  explicit FairStatements(const HoldRows& rows);

  std::string make_head;      // the head row on a name's first use here: name
  std::string take;           // free, nobody queued: bind_hold, name, hold id
  std::string checked_take;   // free, the queue intent stale: name, bind_hold, name, hold id
  std::string join;           // the head's intent raised and the entry written (see FairKind::join)
  std::string look;           // a queued waiter's locking read: entry slot, its hold id, name
  std::string grant[2];       // the release with a queue ([1]: ringing): name, [ring, rung, next], name, hold id
  std::string take_first;     // the first live entry takes a free head: name, name, slot, hold id
  std::string quiet_free[2];  // the release with nobody queued ([1]: ringing): [ring], 0, name, hold id
  std::string leave;          // an entry leaves the queue: name, slot, hold id
  std::string force_grant;    // force-unlock: the head granted to the first live entry (or freed): name, name
  std::string renew_entries;  // this client's live entries of held names: intent, slots, client key, margin, names...
  std::string place;          // the live entries in queue order (a client's place): name
};

// How far ahead a join sets the head's queue intent: the intent only says the
// queue may be non-empty, and is cleared by the release (or force, or
// checked take) that finds no live entry, so no waiter renews it.
inline constexpr std::int64_t kFairHeadIntentUs = 24LL * 3600 * 1'000'000;

}  // namespace dlock::details
