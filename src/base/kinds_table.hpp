// The kinds of rows in the lock table as one table of data (abseil's
// MuHow): every difference between kinds that code outside a kind needs is
// a column here, and the maps between the enums that name kinds (Kind,
// Lock::Side, HoldType, MetricKind) and the kind numbers in statements are
// read from it rather than written as switches.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string>

#include "base/keys.hpp"
#include "dlock/introspection.hpp"
#include "dlock/lock.hpp"
#include "dlock/metrics.hpp"

namespace dlock::details {

struct KindInfo {
  Kind kind;
  // For messages, logs and operators.
  const char* name;
  // What introspection shows its live rows as; none: its rows are never
  // holds.
  std::optional<HoldType> hold_type;
  // What metrics() counts its acquisitions under.
  MetricKind metric;
  // The Lock handle that names it, if one does.
  std::optional<LockSide> side;
  // Its rows above slot 0 are waiters, not holds (a waiting writer's intent,
  // a fair lock's queue entry).
  bool waiters_above_slot_0;
  // Which of its rows any client deletes once they have been free, and
  // untouched, for a while (rows keyed by a client: read holds, waiters);
  // the others stay for good, their fence with them.
  enum class Swept : unsigned char { kNone, kAboveSlot0, kAll } swept;
  // Its rows, for readers of the table (sql/schema.sql has the columns).
  const char* rows;
};

// Ordered by number, from 1.
inline constexpr std::array<KindInfo, 7> kKinds{{
    {Kind::kLock, "lock", HoldType::kLock, MetricKind::kLock, LockSide::kMutex, false, KindInfo::Swept::kNone,
     "(1, name, 0): a reentrant lock's hold, counted"},
    {Kind::kSemaphore, "semaphore", HoldType::kSemaphore, MetricKind::kSemaphore, std::nullopt, false, KindInfo::Swept::kNone,
     "(2, name, slot 0 .. bound-1): a semaphore's permits, one a row"},
    {Kind::kWrite, "write", HoldType::kWrite, MetricKind::kWrite, LockSide::kWrite, true, KindInfo::Swept::kAboveSlot0,
     "(3, name, 0): a read-write lock's head, with its write hold; (3, name, client key): a waiting writer's intent"},
    {Kind::kRead, "read", HoldType::kRead, MetricKind::kRead, LockSide::kRead, false, KindInfo::Swept::kAll,
     "(4, name, client key << 16 | n): a read hold, the row reused by its client"},
    {Kind::kFair, "fair", HoldType::kFairLock, MetricKind::kFairLock, LockSide::kFair, true, KindInfo::Swept::kAboveSlot0,
     "(5, name, 0): a fair lock's hold; (5, name, slot > 0): its queue of waiters"},
    {Kind::kElection, "election", HoldType::kElection, MetricKind::kElection, std::nullopt, false, KindInfo::Swept::kNone,
     "(6, name, 0): an election's leadership, value and revision"},
    {Kind::kObserver, "observer", std::nullopt, MetricKind::kElection, std::nullopt, false, KindInfo::Swept::kNone,
     "(7, name, client key): a parked observer of election `name`, never a hold"},
}};

constexpr bool kinds_in_order() {
  for (std::size_t i = 0; i < kKinds.size(); ++i)
    if (static_cast<std::size_t>(kKinds[i].kind) != i + 1) return false;
  return true;
}
static_assert(kinds_in_order(), "kKinds must list the kinds by number, from 1");

// Null for a number no kind has (a row of a newer version, say).
constexpr const KindInfo* find_kind(std::size_t number) {
  return number >= 1 && number <= kKinds.size() ? &kKinds[number - 1] : nullptr;
}
constexpr const KindInfo& info(Kind kind) { return *find_kind(static_cast<std::size_t>(kind)); }

// "lock", "semaphore", "write", "read", "fair", "election", "observer".
constexpr const char* kind_name(Kind kind) {
  const KindInfo* k = find_kind(static_cast<std::size_t>(kind));
  return k != nullptr ? k->name : "unknown";
}
constexpr MetricKind metric_kind(Kind kind) { return info(kind).metric; }

// The kind a Lock handle's side names.
constexpr Kind kind_of(LockSide side) {
  for (const auto& k : kKinds)
    if (k.side == side) return k.kind;
  return Kind::kLock;
}
constexpr NameKeyView key_of(LockSide side, std::string_view name) { return NameKeyView{kind_of(side), name}; }

// The kind whose rows introspection shows as `type`.
constexpr std::optional<Kind> kind_of(HoldType type) {
  for (const auto& k : kKinds)
    if (k.hold_type == type) return k.kind;
  return std::nullopt;
}

// The kind's number as a statement's literal ("5").
inline std::string kind_sql(Kind kind) { return std::to_string(static_cast<unsigned>(kind)); }

// The condition that picks the rows which are holds when live: the kinds
// with a hold type, less their waiters' rows.
inline std::string hold_rows_sql() {
  std::string holds;
  std::string waiters;
  for (const auto& k : kKinds) {
    if (!k.hold_type) continue;
    (holds.empty() ? holds : holds += ", ") += kind_sql(k.kind);
    if (k.waiters_above_slot_0) (waiters.empty() ? waiters : waiters += ", ") += kind_sql(k.kind);
  }
  return "kind IN (" + holds + ") AND NOT (kind IN (" + waiters + ") AND slot > 0)";
}

// The condition that picks the rows any client may delete once stale
// (KindInfo::swept).
inline std::string swept_rows_sql() {
  std::string all;
  std::string above;
  for (const auto& k : kKinds) {
    std::string& list = k.swept == KindInfo::Swept::kAll ? all : above;
    if (k.swept != KindInfo::Swept::kNone) (list.empty() ? list : list += ", ") += kind_sql(k.kind);
  }
  return "(kind IN (" + all + ") OR (kind IN (" + above + ") AND slot > 0))";
}

}  // namespace dlock::details
