// How `dlock status` shows fair locks: each one held or queued for, with
// its holder, how many wait and the first of them.
#pragma once

#include <string>
#include <vector>

#include "api/tools.hpp"

namespace dlock::cli {

struct FairView {
  std::string name;
  details::HoldRow hold;  // live: the holder
  details::FairQueue queue;  // length 0: nobody waits
};

// The fair locks held (live rows of kind fair) or queued for.
std::vector<FairView> group_fair(const std::vector<details::HoldRow>& rows,
                                 const std::vector<details::FairQueue>& queues);
// One JSON object: {"kind": "fair", "name", ["name_hex",] "held",
// "machine_id", "host", "pid", "fence", "expires_in_ms", "watchdog",
// "queued", "first_waiter": null or {"machine_id", "host", "pid",
// "waiting_since", "waited_ms"}}.
std::string fair_json(const FairView& view);
// Rows for the text table: name, holder, host, pid, expires in, fence,
// queued, first waiter, waiting for.
std::vector<std::vector<std::string>> fair_cells(const std::vector<FairView>& views);

}  // namespace dlock::cli
