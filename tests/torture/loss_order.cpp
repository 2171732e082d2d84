#include "torture/loss_order.hpp"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <sstream>

namespace dlock::torture {

namespace {

struct Interval {
  std::string process, owner, name;
  std::uint64_t fence = 0;
  bool shared = false;
  std::int64_t from = 0;
  std::int64_t to = std::numeric_limits<std::int64_t>::max();
  bool lost = false;
};

// A permit's resource: "s" and its slot.
bool is_slot(const std::string& name) {
  return name.size() > 1 && name[0] == 's' && name.find_first_not_of("0123456789", 1) == std::string::npos;
}

// Whether `process` was stopped or dead at some moment in [from, to].
bool could_not_count(const std::vector<Stopped>& stopped, const std::string& process, std::int64_t from,
                     std::int64_t to) {
  return std::any_of(stopped.begin(), stopped.end(), [&](const Stopped& s) {
    return s.process == process && s.from_us <= to && s.to_us >= from;
  });
}

// The holds, each ended by its let-go or its loss (whichever came first).
std::vector<Interval> intervals(std::vector<HoldEvent>& events) {
  std::stable_sort(events.begin(), events.end(),
                   [](const HoldEvent& a, const HoldEvent& b) { return a.at_us < b.at_us; });
  std::vector<Interval> out;
  std::map<std::string, std::vector<std::size_t>> open;  // process -> its open intervals
  for (const auto& e : events) {
    auto& mine = open[e.process];
    if (e.type == HoldEvent::Type::kHeld) {
      mine.push_back(out.size());
      out.push_back(Interval{e.process, e.owner, e.name, e.fence, e.shared, e.at_us});
      continue;
    }
    const bool permit_loss = e.type == HoldEvent::Type::kLost && e.name == "sem";
    for (auto it = mine.begin(); it != mine.end();) {
      Interval& i = out[*it];
      const bool ends = e.type == HoldEvent::Type::kLetGo
                            ? i.owner == e.owner && i.name == e.name && i.fence == e.fence
                            : permit_loss ? is_slot(i.name)
                                          : i.name == e.name && i.fence == e.fence;
      if (!ends) {
        ++it;
        continue;
      }
      i.to = e.at_us;
      i.lost = e.type == HoldEvent::Type::kLost;
      it = mine.erase(it);
    }
  }
  return out;
}

std::string describe(const Interval& granted, const Interval& earlier) {
  std::ostringstream d;
  d << granted.name << " granted to " << granted.owner << " (fence " << granted.fence << ") at " << granted.from
    << " while " << earlier.owner << " still counted its hold (fence " << earlier.fence << ") live";
  if (earlier.to == std::numeric_limits<std::int64_t>::max()) {
    d << " (never told it was lost)";
  } else {
    d << " (" << (earlier.lost ? "told it was lost " : "let it go ") << (earlier.to - granted.from) / 1000
      << " ms later)";
  }
  return d.str();
}

}  // namespace

bool parse_hold_event(const std::string& line, HoldEvent& out) {
  std::istringstream in(line);
  std::string word, mode;
  in >> word;
  out = HoldEvent{};
  if (word == "held") {
    out.type = HoldEvent::Type::kHeld;
    in >> out.name >> out.fence >> mode >> out.owner >> out.at_us;
    out.shared = mode == "s";
  } else if (word == "letgo") {
    out.type = HoldEvent::Type::kLetGo;
    in >> out.name >> out.fence >> out.owner >> out.at_us;
  } else if (word == "lost") {
    out.type = HoldEvent::Type::kLost;
    in >> out.name >> out.fence >> out.process >> out.at_us;
  } else {
    return false;
  }
  if (out.type != HoldEvent::Type::kLost) out.process = out.owner.substr(0, out.owner.find(':'));
  return !in.fail();
}

LossOrderResult check_loss_order(std::vector<HoldEvent> events, const std::vector<Stopped>& stopped,
                                 std::size_t max_examples) {
  std::vector<Interval> holds = intervals(events);
  LossOrderResult r;
  std::map<std::string, std::vector<const Interval*>> by_name;
  for (const auto& h : holds) {
    by_name[h.name].push_back(&h);
    ++r.holds;
    if (h.lost) ++r.told_lost;
  }
  for (auto& [name, list] : by_name) {
    // Sweep in grant order; `live` holds the earlier holds not yet ended.
    std::vector<const Interval*> live;
    for (const Interval* h : list) {
      live.erase(std::remove_if(live.begin(), live.end(), [&](const Interval* e) { return e->to <= h->from; }),
                 live.end());
      for (const Interval* e : live) {
        if (e->owner == h->owner || (e->shared && h->shared)) continue;
        // Stopped or dead when the grant came (or just before: a process
        // resumed is told at once, but not in no time).
        if (could_not_count(stopped, e->process, h->from - 100'000, h->from)) continue;
        if (r.violations++ < static_cast<long>(max_examples)) r.examples.push_back(describe(*h, *e));
      }
      live.push_back(h);
    }
  }
  return r;
}

}  // namespace dlock::torture
