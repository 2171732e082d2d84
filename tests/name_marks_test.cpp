// NameMarks, no database: a mark lasts until its time or until taken,
// whichever comes first; an expired mark reads as none and is removed;
// marks of different names are independent.
#include <gtest/gtest.h>

#include <string>
#include <thread>

#include "base/name_marks.hpp"

namespace dlock::details {
namespace {

// A lock's key: these tests are about names, and every kind behaves alike.
inline NameKey K(std::string_view name) { return NameKey(Kind::kLock, name); }

using namespace std::chrono_literals;
using Clock = NameMarks::Clock;

TEST(NameMarks, AnUnmarkedNameHasNothingLeftAndNothingToTake) {
  NameMarks marks;
  EXPECT_EQ(marks.left(K("n")), 0us);
  EXPECT_FALSE(marks.take(K("n")));
}

TEST(NameMarks, AMarkLastsUntilItsTime) {
  NameMarks marks;
  marks.mark(K("n"), Clock::now() + 1h);
  const auto left = marks.left(K("n"));
  EXPECT_GT(left, 59min);
  EXPECT_LE(left, 1h);
  EXPECT_EQ(marks.left(K("other")), 0us) << "marks are per name";
  EXPECT_GT(marks.left(K("n")), 0us) << "left() does not consume the mark";
}

TEST(NameMarks, AnExpiredMarkIsNoneAndCannotBeTaken) {
  NameMarks marks;
  marks.mark(K("n"), Clock::now() - 1ms);
  EXPECT_EQ(marks.left(K("n")), 0us);
  marks.mark(K("m"), Clock::now() + 2ms);
  const auto end = Clock::now() + 10s;
  while (marks.left(K("m")) > 0us && Clock::now() < end) std::this_thread::yield();
  EXPECT_EQ(marks.left(K("m")), 0us);
  EXPECT_FALSE(marks.take(K("m"))) << "an expired mark was taken";
}

TEST(NameMarks, ALiveMarkNeverReadsAsNone) {
  // left() must agree with take(): a mark with less than a microsecond
  // left is still a mark (it once read as zero, and was then taken).
  NameMarks marks;
  for (int i = 0; i < 2000; ++i) {
    const std::string name = "n" + std::to_string(i);
    marks.mark(K(name), Clock::now() + std::chrono::nanoseconds(200 + i % 1000));
    const bool none = marks.left(K(name)) == 0us;
    if (none) {
      EXPECT_FALSE(marks.take(K(name))) << "a mark read as none was still taken (" << name << ")";
    }
  }
}

TEST(NameMarks, TakeConsumesAMarkOnce) {
  NameMarks marks;
  marks.mark(K("n"), Clock::time_point::max());
  EXPECT_GT(marks.left(K("n")), 24h) << "a mark until max() lasts until taken";
  EXPECT_TRUE(marks.take(K("n")));
  EXPECT_FALSE(marks.take(K("n")));
  EXPECT_EQ(marks.left(K("n")), 0us);
}

TEST(NameMarks, ALaterMarkReplacesAnEarlierOne) {
  NameMarks marks;
  marks.mark(K("n"), Clock::now() + 1h);
  marks.mark(K("n"), Clock::now() - 1ms);
  EXPECT_EQ(marks.left(K("n")), 0us);
  marks.mark(K("n"), Clock::now() + 1h);
  EXPECT_GT(marks.left(K("n")), 0us);
}

// Names marked once and never looked at again (one-time names) must not
// pile up: expired marks go when the map grows.
TEST(NameMarks, ExpiredMarksOfNamesNeverLookedAtAgainAreDropped) {
  NameMarks marks;
  const auto past = Clock::now() - 1s;
  for (int i = 0; i < 100'000; ++i) marks.mark(K("once-" + std::to_string(i)), past);
  EXPECT_LE(marks.size(), NameMarks::kFirstSweep);
  marks.mark(K("live"), Clock::now() + 1h);
  for (int i = 0; i < 10'000; ++i) marks.mark(K("again-" + std::to_string(i)), past);
  EXPECT_GT(marks.left(K("live")), 0us) << "a sweep dropped a live mark";
}

TEST(NameMarks, ConcurrentMarksAndTakesAreSafe) {
  NameMarks marks;
  std::thread marker([&] {
    for (int i = 0; i < 10000; ++i) marks.mark(K(i % 2 ? "a" : "b"), Clock::time_point::max());
  });
  int taken = 0;
  for (int i = 0; i < 10000; ++i) taken += marks.take(K(i % 2 ? "a" : "b")) ? 1 : 0;
  marker.join();
  taken += marks.take(K("a")) ? 1 : 0;
  taken += marks.take(K("b")) ? 1 : 0;
  EXPECT_GE(taken, 2) << "the last marks of both names were lost";
  EXPECT_FALSE(marks.take(K("a")));
  EXPECT_FALSE(marks.take(K("b")));
}

}  // namespace
}  // namespace dlock::details
