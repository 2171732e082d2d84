// NameNotes, no database: a note lasts until its time or until taken,
// whichever comes first; an expired note reads as none and is removed;
// notes of different names are independent.
#include <gtest/gtest.h>

#include <string>
#include <thread>

#include "base/name_notes.hpp"

namespace dlock::details {
namespace {

// A lock's key: these tests are about names, and every kind behaves alike.
inline NameKey K(std::string_view name) { return NameKey(Kind::kLock, name); }

using namespace std::chrono_literals;
using Clock = NameNotes::Clock;

TEST(NameNotes, AnUnnotedNameHasNothingLeftAndNothingToTake) {
  NameNotes notes;
  EXPECT_EQ(notes.left(K("n")), 0us);
  EXPECT_FALSE(notes.take(K("n")));
}

TEST(NameNotes, ANoteLastsUntilItsTime) {
  NameNotes notes;
  notes.note(K("n"), Clock::now() + 1h);
  const auto left = notes.left(K("n"));
  EXPECT_GT(left, 59min);
  EXPECT_LE(left, 1h);
  EXPECT_EQ(notes.left(K("other")), 0us) << "notes are per name";
  EXPECT_GT(notes.left(K("n")), 0us) << "left() does not consume the note";
}

TEST(NameNotes, AnExpiredNoteIsNoneAndCannotBeTaken) {
  NameNotes notes;
  notes.note(K("n"), Clock::now() - 1ms);
  EXPECT_EQ(notes.left(K("n")), 0us);
  notes.note(K("m"), Clock::now() + 2ms);
  const auto end = Clock::now() + 10s;
  while (notes.left(K("m")) > 0us && Clock::now() < end) std::this_thread::yield();
  EXPECT_EQ(notes.left(K("m")), 0us);
  EXPECT_FALSE(notes.take(K("m"))) << "an expired note was taken";
}

TEST(NameNotes, ALiveNoteNeverReadsAsNone) {
  // left() must agree with take(): a note with less than a microsecond
  // left is still a note (it once read as zero, and was then taken).
  NameNotes notes;
  for (int i = 0; i < 2000; ++i) {
    const std::string name = "n" + std::to_string(i);
    notes.note(K(name), Clock::now() + std::chrono::nanoseconds(200 + i % 1000));
    const bool none = notes.left(K(name)) == 0us;
    if (none) {
      EXPECT_FALSE(notes.take(K(name))) << "a note read as none was still taken (" << name << ")";
    }
  }
}

TEST(NameNotes, TakeConsumesANoteOnce) {
  NameNotes notes;
  notes.note(K("n"), Clock::time_point::max());
  EXPECT_GT(notes.left(K("n")), 24h) << "a note until max() lasts until taken";
  EXPECT_TRUE(notes.take(K("n")));
  EXPECT_FALSE(notes.take(K("n")));
  EXPECT_EQ(notes.left(K("n")), 0us);
}

TEST(NameNotes, ALaterNoteReplacesAnEarlierOne) {
  NameNotes notes;
  notes.note(K("n"), Clock::now() + 1h);
  notes.note(K("n"), Clock::now() - 1ms);
  EXPECT_EQ(notes.left(K("n")), 0us);
  notes.note(K("n"), Clock::now() + 1h);
  EXPECT_GT(notes.left(K("n")), 0us);
}

// Names marked once and never looked at again (one-time names) must not
// pile up: expired notes go when the map grows.
TEST(NameNotes, ExpiredNotesOfNamesNeverLookedAtAgainAreDropped) {
  NameNotes notes;
  const auto past = Clock::now() - 1s;
  for (int i = 0; i < 100'000; ++i) notes.note(K("once-" + std::to_string(i)), past);
  EXPECT_LE(notes.size(), NameNotes::kFirstSweep);
  notes.note(K("live"), Clock::now() + 1h);
  for (int i = 0; i < 10'000; ++i) notes.note(K("again-" + std::to_string(i)), past);
  EXPECT_GT(notes.left(K("live")), 0us) << "a sweep dropped a live note";
}

TEST(NameNotes, ConcurrentNotesAndTakesAreSafe) {
  NameNotes notes;
  std::thread marker([&] {
    for (int i = 0; i < 10000; ++i) notes.note(K(i % 2 ? "a" : "b"), Clock::time_point::max());
  });
  int taken = 0;
  for (int i = 0; i < 10000; ++i) taken += notes.take(K(i % 2 ? "a" : "b")) ? 1 : 0;
  marker.join();
  taken += notes.take(K("a")) ? 1 : 0;
  taken += notes.take(K("b")) ? 1 : 0;
  EXPECT_GE(taken, 2) << "the last notes of both names were lost";
  EXPECT_FALSE(notes.take(K("a")));
  EXPECT_FALSE(notes.take(K("b")));
}

}  // namespace
}  // namespace dlock::details
