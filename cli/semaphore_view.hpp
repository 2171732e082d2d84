// How `dlock status` shows semaphores: one entry per semaphore with live
// permits (holders / bound), and each permit's slot, holder and lease.
#pragma once

#include <string>
#include <vector>

#include "api/tools.hpp"

namespace dlock::cli {

struct SemaphoreView {
  std::string name;
  std::uint32_t bound = 0;  // the largest bound its holders acquired under
  std::vector<details::HoldRow> permits;  // by slot
};

// Groups live permit rows (ordered by name and slot) per semaphore.
std::vector<SemaphoreView> group_permits(const std::vector<details::HoldRow>& rows);
// One JSON object: {"kind": "semaphore", "name", ["name_hex",] "holders",
// "bound", "permits": [{"slot", "machine_id", "host", "pid", "fence",
// "acquired_at", "held_for_ms", "expires_in_ms", "watchdog"}]}.
std::string semaphore_json(const SemaphoreView& view);
// Rows for the text table (one per permit): name, holders/bound, slot,
// holder, host, pid, held for, expires in, renewal, fence.
std::vector<std::vector<std::string>> semaphore_cells(const std::vector<SemaphoreView>& views);

}  // namespace dlock::cli
