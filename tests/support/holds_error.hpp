// Whether an asynchronous operation's std::exception_ptr holds an E, for
// checking what a handler was given. Header-only: also for the test built
// against other Boost headers, which links no test support library.
#pragma once

#include <exception>

namespace dlock::test {

template <class E>
bool holds_error(const std::exception_ptr& error) {
  if (!error) return false;
  try {
    std::rethrow_exception(error);
  } catch (const E&) {
    return true;
  } catch (...) {
    return false;
  }
}

}  // namespace dlock::test
