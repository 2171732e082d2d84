// The owner half that names a thread. Assigned from a process-wide counter on
// a thread's first use and never reused while the process lives, unlike OS
// thread ids and std::thread::id, which are recycled: a recycled id would let
// a new thread inherit a dead thread's hold.
#pragma once

#include <cstdint>
#include <string>

namespace dlock::details {

// Owner ids (dlock::Owner::id()): one process-wide counter hands out both
// the ids of threads (on a thread's first use) and of Owner::create(), so
// none is ever 0 or reused while the process lives.
std::uint64_t current_thread_id();
std::uint64_t new_owner_id();

// host-pid-random, at most 64 bytes: a label unique per client instance.
std::string generate_machine_id();

// This machine's host name (at most 255 bytes; "host" if it has none).
std::string host_name();

// A random, nonzero 64-bit id for a new hold. Two holds (in any clients,
// processes or machines) get the same id with negligible probability.
std::uint64_t new_hold_id();

}  // namespace dlock::details
