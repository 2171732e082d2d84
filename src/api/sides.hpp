// Which kind of hold a public handle names: Lock::Side to the engine's Kind.
#pragma once

#include <string_view>

#include "base/keys.hpp"
#include "dlock/lock.hpp"

namespace dlock::details {

inline Kind kind_of(LockSide side) {
  switch (side) {
    case LockSide::kRead:
      return Kind::kRead;
    case LockSide::kWrite:
      return Kind::kWrite;
    case LockSide::kFair:
      return Kind::kFair;
    case LockSide::kMutex:
      break;
  }
  return Kind::kLock;
}

inline NameKeyView key_of(LockSide side, std::string_view name) { return NameKeyView{kind_of(side), name}; }

}  // namespace dlock::details
