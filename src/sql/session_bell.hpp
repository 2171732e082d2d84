// A pooled session's own bell (fast wake-up of lock waiters in other
// clients; the protocol is in docs/design.md, "Waking waiters elsewhere").
//
// A session bell is a user-level lock named "dlock-s:<16 hex digits>:<n>":
// the hex digits are random per session, so no other session ever asks for
// the same name, and n is the bell's generation. The session holds exactly
// one generation at any time from the moment it took its first lock row: a
// ring takes generation n + 1 and gives back n in one statement, which wakes
// every session blocked on n.
//
// State of one Connection, touched only by the thread using it.
#pragma once

#include <cstdint>
#include <string>

namespace dlock::details {

class SessionBell {
 public:
  // The bell's prefix for `random`: "dlock-s:" and 16 hex digits and ':'.
  static std::string prefix_for(std::uint64_t random);

  // True once take() was tried on this session (whatever came of it).
  bool tried() const { return tried_; }
  // The name of the bell this session holds now; empty when it holds none
  // (not taken yet, or taking it failed).
  const std::string& current() const { return current_; }
  // The name the next ring takes (valid only while current() is not empty).
  std::string next() const { return prefix_ + std::to_string(generation_ + 1); }

  // Records the outcome of the first GET_LOCK of `prefix` + "0".
  void taken(std::string prefix, bool ok);
  // A ring took next() and gave back current().
  void advanced();
  // A ring gave back current() but could not take next(): no bell from now.
  void lost();

 private:
  bool tried_ = false;
  std::string prefix_;
  std::uint64_t generation_ = 0;
  std::string current_;
};

}  // namespace dlock::details
