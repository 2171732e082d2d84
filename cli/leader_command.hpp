// `dlock leader`: who leads an election (value, term, host, pid, since),
// once or, with --watch, one line per change until interrupted.
#pragma once

#include <dlock/options.hpp>

#include <string>

namespace dlock::cli {

// Returns the exit code: 0, or 128 + N when --watch ended on signal N.
int leader_command(const Options& options, const std::string& name, bool json, bool watch);

}  // namespace dlock::cli
