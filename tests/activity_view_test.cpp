// How holds and waiters read in `dlock status` and `dlock top`
// (cli/activity_view.hpp), from made-up snapshots: no database.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "activity_view.hpp"

namespace dlock::cli {
namespace {

using namespace std::chrono_literals;

HoldInfo permit(std::uint64_t slot) {
  HoldInfo h;
  h.name = "pool";
  h.type = HoldType::kSemaphore;
  h.slot = slot;
  h.bound = 4;
  h.machine = "web01";
  h.host = "h1";
  h.pid = 42;
  h.owner = 7;
  h.count = 1;
  h.fence = 9;
  h.acquired_at = "2026-01-02T03:04:05.000006";
  h.held_for = 12'345'678us;
  h.expires_in = 2'500'000us;
  h.watchdog = true;
  h.waiters = 1;
  return h;
}

TEST(ActivityView, TheSummaryCountsEveryKindAndSaysWhenTheListIsCut) {
  Activity a;
  a.held[static_cast<std::size_t>(HoldType::kLock)] = 3;
  a.held[static_cast<std::size_t>(HoldType::kSemaphore)] = 2;
  a.waiting = 1;
  a.holds = {permit(0), permit(1)};
  EXPECT_EQ(summary_line(a), "5 holds (3 lock, 2 semaphore), 1 waiting in fair lock queues, showing the 2 longest held");
  Activity none;
  EXPECT_EQ(summary_line(none), "0 holds, 0 waiting in fair lock queues");
  Activity one;
  one.held[static_cast<std::size_t>(HoldType::kElection)] = 1;
  one.holds = {permit(0)};
  EXPECT_EQ(summary_line(one), "1 hold (1 election), 0 waiting in fair lock queues");
}

TEST(ActivityView, EveryKindFillsTheSameColumns) {
  HoldInfo kept = permit(0);
  kept.type = HoldType::kLock;
  kept.count = 0;
  const Cells cells = hold_cells({permit(3), kept}, {"free"});
  ASSERT_EQ(cells.size(), 4u);
  for (const auto& row : cells) EXPECT_EQ(row.size(), cells[0].size());
  EXPECT_EQ(cells[0][1], "KIND");
  EXPECT_EQ(cells[1][1], "semaphore 3/4");
  EXPECT_EQ(cells[1][2], "web01/7");
  EXPECT_EQ(cells[1][7], "watchdog");
  EXPECT_EQ(cells[1][10], "1");
  EXPECT_EQ(cells[2][1], "lock");
  EXPECT_EQ(cells[2][7], "kept") << "a name kept by --at-least";
  EXPECT_EQ(cells[3][0], "free");
  EXPECT_EQ(cells[3][1], "-");
}

TEST(ActivityView, ColumnsAlignByCharactersNotBytes) {
  const std::string out = format_cells({{"NAME", "X"}, {"caf\xc3\xa9", "y"}});
  EXPECT_EQ(out, "NAME  X\ncaf\xc3\xa9  y\n");
}

TEST(ActivityView, JsonCarriesExactBytesAndThePermitsSlot) {
  HoldInfo h = permit(2);
  h.name = std::string("\xff-raw", 5);
  const auto j = nlohmann::json::parse(hold_json(h));
  EXPECT_EQ(j["kind"], "semaphore");
  EXPECT_EQ(j["name_hex"], "ff2d726177");
  EXPECT_EQ(j["slot"], 2);
  EXPECT_EQ(j["bound"], 4);
  EXPECT_EQ(j["held_for_ms"], 12345);
  EXPECT_EQ(j["acquired_at"], "2026-01-02T03:04:05.000006Z");
  EXPECT_EQ(j["waiters"], 1);
  HoldInfo lock = permit(0);
  lock.type = HoldType::kLock;
  EXPECT_FALSE(nlohmann::json::parse(hold_json(lock)).contains("slot")) << "only a permit has a slot";
  EXPECT_EQ(free_name_json("x"), "{\"kind\":null,\"name\":\"x\",\"held\":false}");
  WaiterInfo w;
  w.name = "q";
  w.position = 2;
  w.waited_for = 1500ms;
  const auto wj = nlohmann::json::parse(waiter_json(w));
  EXPECT_EQ(wj["kind"], "fair");
  EXPECT_EQ(wj["waiting"], true);
  EXPECT_EQ(wj["position"], 2);
  EXPECT_EQ(wj["waited_ms"], 1500);
  Activity a;
  a.holds = {h};
  a.waiters = {w};
  const auto sj = nlohmann::json::parse(snapshot_json(a));
  EXPECT_EQ(sj["held"].size(), kHoldTypeCount);
  EXPECT_EQ(sj["holds"].size(), 1u);
  EXPECT_EQ(sj["waiters"][0]["position"], 2);
}

TEST(ActivityView, TheHolderSummarySaysWhoAndForHowLong) {
  HoldInfo h = permit(0);
  h.type = HoldType::kLock;
  EXPECT_EQ(holder_summary(h),
            "web01 (host h1, pid 42, owner 7), held for 12.3s, expires in 2.5s unless renewed, fence 9");
  h.count = 0;
  EXPECT_NE(holder_summary(h).find("kept taken (--at-least)"), std::string::npos);
}

}  // namespace
}  // namespace dlock::cli
