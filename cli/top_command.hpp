// `dlock top`: a live view of one table's holds and waiters (the library's
// introspection), longest held first, refreshed every interval until
// SIGINT, SIGTERM or SIGHUP; --once prints one view and exits.
//
// On a terminal each view replaces the last (the screen is cleared); in a
// pipe views follow one another, separated by a blank line, with no escape
// codes. --json prints one JSON object per view and line. A database error
// is shown in place of a view and the next refresh tries again (with
// --once it is the exit code's, 3).
#pragma once

#include <dlock/introspection.hpp>
#include <dlock/options.hpp>

#include <string>
#include <vector>

namespace dlock::cli {

struct TopArgs {
  std::vector<std::string> names;  // empty: every name
  std::vector<HoldType> types;     // empty: every kind
  std::size_t limit = 50;          // most holds (and waiters) shown; 0: all
  Millis interval{1000};
  bool once = false;
  bool json = false;
};

// Returns the exit code: 0 (also when a signal ended the view).
int top_command(const Options& options, const TopArgs& args);

}  // namespace dlock::cli
