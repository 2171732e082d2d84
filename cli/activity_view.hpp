// How holds and waiters read to an operator (`dlock status`, `dlock top`,
// and `dlock run` / `force-unlock` when they say who holds a name): one
// layout for every kind of hold, from the library's introspection
// (<dlock/introspection.hpp>).
//
// Table columns: NAME, KIND, HOLDER (label/owner), HOST, PID, HELD FOR,
// EXPIRES IN, RENEWAL (watchdog, fixed, or kept by --at-least), COUNT,
// FENCE, WAITERS. A semaphore permit's KIND is "semaphore S/B": slot S of
// bound B. Waiters the database can name (fair lock queues) follow in a
// table of their own.
//
// JSON: one object per line. A hold: {"kind", "name", ["name_hex",]
// "held": true, "machine_id", "host", "pid", "owner", "count", "fence",
// "acquired_at", "held_for_ms", "expires_in_ms", "watchdog", "waiters"}
// plus "slot" and "bound" for a permit. A waiter: {"kind", "name",
// ["name_hex",] "waiting": true, "position", "machine_id", "host", "pid",
// "owner", "waiting_since", "waited_ms"}. A name asked for that has no
// hold and no waiter: {"kind": null, "name", ["name_hex",] "held": false}.
#pragma once

#include <dlock/introspection.hpp>

#include <string>
#include <vector>

namespace dlock::cli {

using Cells = std::vector<std::vector<std::string>>;

std::string hold_json(const HoldInfo& hold);
std::string waiter_json(const WaiterInfo& waiter);
std::string free_name_json(const std::string& name);
// One line for a whole snapshot (`dlock top --json`): {"held": {"lock": n,
// ... per kind}, "waiting", "holds": [hold objects], "waiters": [waiter
// objects]}.
std::string snapshot_json(const Activity& activity);

// The holds table (header first); `free_names` get a row of dashes each.
Cells hold_cells(const std::vector<HoldInfo>& holds, const std::vector<std::string>& free_names = {});
// The waiters table (header first).
Cells waiter_cells(const std::vector<WaiterInfo>& waiters);
// "7 holds (3 lock, 2 semaphore, 1 write, 1 election), 2 waiting", and
// ", showing the 5 longest held" when the limit cut the list.
std::string summary_line(const Activity& activity);
// Prints `cells` as aligned columns (widths in characters, not bytes).
std::string format_cells(const Cells& cells);

// "web01 (host db-7, pid 4242, owner 3), held for 12.0s, expires in 28.0s
// unless renewed, fence 17", or for a name kept by --at-least who ran last
// and when it frees.
std::string holder_summary(const HoldInfo& hold);

}  // namespace dlock::cli
