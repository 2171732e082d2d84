// The fair lock's grant-order check: a grant out of queue order is a
// violation.
//
// What it reads: snapshots of a fair lock's queue, each one consistent
// read of the name's rows (the head's fence, then the hold ids of the live
// queue entries in queue order), and the grants the workers recorded (each
// hold id with the fence it was granted). A queue entry keeps its hold id
// from joining to its grant and is granted only while it is live; an entry
// that was passed over or left joins again with a new hold id. So if hold
// h is live in a snapshot taken at head fence F and is later granted fence
// G, every fence between F and G went to an entry queued ahead of h in
// that snapshot: any other grant there (a later joiner, or a take that
// never queued) overtook h. The check needs no clock.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace dlock::torture {

struct QueueSnapshot {
  std::string name;
  std::uint64_t head_fence = 0;      // the head row's fence when the snapshot was read
  std::vector<std::uint64_t> queue;  // hold ids of the live entries, first in line first
};

struct RecordedGrant {
  std::string name;
  std::uint64_t fence = 0;
  std::uint64_t hold_id = 0;
};

struct GrantOrderResult {
  long holds_checked = 0;  // recorded grants whose hold some snapshot showed queued
  long violations = 0;
  std::vector<std::string> examples;  // the first few violations, described
};

// Checks every snapshot against the grants. `max_examples`: how many
// violations are described (all are counted).
GrantOrderResult check_grant_order(const std::vector<QueueSnapshot>& snapshots,
                                   const std::vector<RecordedGrant>& grants, std::size_t max_examples = 20);

}  // namespace dlock::torture
