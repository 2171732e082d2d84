// The dlock command's duration syntax (cli/duration.hpp): flock-style plain
// seconds with fractions, unit suffixes and compounds; everything else is a
// usage error.
#include <gtest/gtest.h>

#include <stdexcept>

#include "duration.hpp"

namespace dlock::cli {
namespace {

using std::chrono::milliseconds;

TEST(Duration, PlainNumbersAreSecondsWithFractions) {
  EXPECT_EQ(parse_duration("5"), milliseconds(5000));
  EXPECT_EQ(parse_duration("0.5"), milliseconds(500));
  EXPECT_EQ(parse_duration(".25"), milliseconds(250));
  EXPECT_EQ(parse_duration("1.0005"), milliseconds(1001)) << "rounded up, never down";
  EXPECT_EQ(parse_duration("0.0000001"), milliseconds(1)) << "nonzero never becomes zero";
  EXPECT_EQ(parse_duration("0", true), milliseconds(0));
}

TEST(Duration, UnitsAndCompounds) {
  EXPECT_EQ(parse_duration("500ms"), milliseconds(500));
  EXPECT_EQ(parse_duration("1.5s"), milliseconds(1500));
  EXPECT_EQ(parse_duration("1m30s"), milliseconds(90'000));
  EXPECT_EQ(parse_duration("1h30m"), milliseconds(5'400'000));
  EXPECT_EQ(parse_duration("2h"), milliseconds(7'200'000));
  EXPECT_EQ(parse_duration("1h2m3s4ms"), milliseconds(3'723'004));
  EXPECT_EQ(parse_duration("0.5m"), milliseconds(30'000));
  EXPECT_EQ(parse_duration("8760h"), milliseconds(365LL * 24 * 3'600'000));
}

TEST(Duration, EverythingElseIsRefusedWithTheTextInTheMessage) {
  for (const char* bad : {"", "5 minutes", "5min", "-5", "+5", "1.", ".", "s", "5x", "1s1m", "1s1s", "1m 30s",
                          "8761h", "99999999999999999999", "1e3", "0x10", "5 ", " 5", "1.5.5"}) {
    try {
      parse_duration(bad);
      ADD_FAILURE() << "accepted \"" << bad << "\"";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("\"") + bad + "\""), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(parse_duration("0"), std::invalid_argument);
  EXPECT_THROW(parse_duration("0ms"), std::invalid_argument);
}

TEST(Duration, FormatReadsBack) {
  EXPECT_EQ(format_duration(milliseconds(250)), "250ms");
  EXPECT_EQ(format_duration(milliseconds(1500)), "1.5s");
  EXPECT_EQ(format_duration(milliseconds(90'000)), "1m30s");
  for (auto ms : {1, 999, 1000, 59'999, 60'000, 3'599'999, 3'600'000, 86'400'000})
    EXPECT_NO_THROW(parse_duration(format_duration(milliseconds(ms)))) << ms;
}

}  // namespace
}  // namespace dlock::cli
