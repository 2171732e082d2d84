// What a hold, a waiter and a row are keyed by.
//
// Every primitive keeps its rows in the one lock table, keyed by (kind,
// name, slot): a Kind says which primitive a row belongs to, so the lock,
// the semaphore and the read-write lock named "x" never meet. The numbers
// are stored in the table: they never change. What differs between kinds
// is one table of data: base/kinds_table.hpp.
//
// A NameKey (kind, name) is what local holds and waiters are grouped by: the
// holds of one owner on a lock, the waiters of one semaphore. Lookups take a
// NameKeyView, so the hot path builds no string.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>

namespace dlock::details {

// The kinds of rows (base/kinds_table.hpp says what each one is).
enum class Kind : std::uint8_t {
  kLock = 1,
  kSemaphore = 2,
  kWrite = 3,
  kRead = 4,
  kFair = 5,
  kElection = 6,
  kObserver = 7,
};

struct NameKeyView {
  Kind kind;
  std::string_view name;
  friend bool operator==(const NameKeyView&, const NameKeyView&) = default;
};

struct NameKey {
  Kind kind = Kind::kLock;
  std::string name;

  NameKey() = default;
  NameKey(Kind k, std::string_view n) : kind(k), name(n) {}
  explicit NameKey(NameKeyView v) : kind(v.kind), name(v.name) {}
  operator NameKeyView() const { return {kind, name}; }  // NOLINT: a view of it
  friend bool operator==(const NameKey&, const NameKey&) = default;
};

// Hashes and compares NameKey and NameKeyView alike (transparent). Not
// noexcept, for the reason StringHash is not (string_map.hpp).
struct NameKeyHash {
  using is_transparent = void;
  std::size_t operator()(NameKeyView k) const {
    return std::hash<std::string_view>{}(k.name) ^ (static_cast<std::size_t>(k.kind) * 0x9e3779b97f4a7c15ULL);
  }
};
struct NameKeyEqual {
  using is_transparent = void;
  bool operator()(NameKeyView a, NameKeyView b) const noexcept { return a == b; }
};

template <class V>
using NameKeyMap = std::unordered_map<NameKey, V, NameKeyHash, NameKeyEqual>;

// The slot of a RowKey whose slot is not known: the row of (kind, name)
// that carries the hold's id (a semaphore take picks a free slot in the
// statement, which does not say which).
inline constexpr std::uint64_t kAnySlot = ~std::uint64_t{0};

// One row of the lock table.
struct RowKey {
  Kind kind = Kind::kLock;
  std::string name;
  std::uint64_t slot = 0;
  friend bool operator==(const RowKey&, const RowKey&) = default;
};

}  // namespace dlock::details
