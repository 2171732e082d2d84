// The herd check of dlock_torture (kHerdClients): after a release of a
// herd name, the next take must come soon while herd waiters wait. A name
// left free for longer than a bound while a waiter waited throughout,
// outside the excused fault windows, is a wake that was lost and that the
// poll did not repair either.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace dlock::torture {

struct HerdCheck {
  long handoffs = 0;  // releases followed by a take while some waiter waited throughout
  long prompt = 0;    // of them, taken again within 100 ms
  std::vector<std::string> stuck;  // descriptions of the gaps over the bound (the first few)
};

class HerdHistory {
 public:
  // A herd waiter waited for `name` from `start_us` to `end_us`.
  void waited(const std::string& name, std::int64_t start_us, std::int64_t end_us);
  // `name` was taken at `at_us` / let go at `at_us` (any owner; only herd
  // names that had a waiter count).
  void acquired(const std::string& name, std::int64_t at_us);
  void let_go(const std::string& name, std::int64_t at_us);
  // Gaps from a release to the next take longer than `bound_us`, while a
  // waiter waited from before the release to after the take, that no
  // window of `excused` overlaps (widened by 2 s before its start).
  HerdCheck check(std::int64_t bound_us, const std::vector<std::pair<std::int64_t, std::int64_t>>& excused,
                  std::size_t max_examples = 20) const;

 private:
  struct Name {
    std::vector<std::pair<std::int64_t, std::int64_t>> waits;
    std::vector<std::int64_t> takes;
    std::vector<std::int64_t> releases;
  };
  std::map<std::string, Name> names_;
};

}  // namespace dlock::torture
