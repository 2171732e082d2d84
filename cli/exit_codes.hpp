// Exit codes of the dlock command. A child's own status passes through
// unchanged (0..255; killed by signal N: 128 + N, as shells report it), so
// dlock's own codes are chosen where a child's status is either impossible
// (the child never ran) or not ordinary (above 128 + the highest signal).
#pragma once

namespace dlock::cli {

inline constexpr int kExitOk = 0;
// `run`: the lock could not be had in time (overridable, like flock -E);
// `force-unlock`: a name was not held.
inline constexpr int kExitConflict = 1;
// Bad command line: unknown flag, malformed URL or duration, bad name.
inline constexpr int kExitUsage = 2;
// The database failed before the command ran (unreachable, denied, ...).
inline constexpr int kExitBackend = 3;
// `run`: the lock was lost while the command ran (force-unlocked, or lease
// expired / renewal failed); the command was terminated.
inline constexpr int kExitLockLost = 200;

}  // namespace dlock::cli
