// Hostile lock names, table-driven: every name is either rejected with
// std::invalid_argument before any SQL runs, or stored and compared exactly
// byte for byte (no collation, no trimming, no wildcard, no escaping bug).
#include <dlock/dlock.hpp>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "test_env.hpp"

namespace dlock {
namespace {

using namespace std::chrono_literals;
using test::fresh_options;
using test::same_table;

std::string hex(const std::string& bytes) {
  static const char digits[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : bytes) {
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

struct Case {
  const char* what;
  std::string name;
  std::vector<std::string> near_misses;  // distinct names that must stay free
};

std::string all_bytes() {  // every byte but NUL, once
  std::string s;
  for (int b = 1; b < 256; ++b) s += static_cast<char>(b);
  return s;
}

const std::vector<Case>& stored_cases() {
  static const std::vector<Case> cases = {
      {"255 bytes (the maximum)", std::string(255, 'n'), {std::string(254, 'n')}},
      {"every byte but NUL", all_bytes(), {all_bytes().substr(1)}},
      {"invalid UTF-8", "\xff\xfe\xfd", {"\xff\xfe", "\xef\xbf\xbd"}},
      {"truncated UTF-8 sequence", "\xc3", {"\xc3\xa9", "?"}},
      {"overlong encoding of '/'", "\xc0\xaf", {"/"}},
      {"lone UTF-16 surrogate", "\xed\xa0\x80", {"\xef\xbf\xbd"}},
      {"single quote", "'", {"''", "\\'"}},
      {"double quote", "\"", {"\"\""}},
      {"backtick", "`", {"``"}},
      {"percent", "%", {"a", "%%", ""}},
      {"LIKE pattern", "a%", {"ab", "a"}},
      {"underscore", "a_c", {"abc", "a\\_c"}},
      {"backslash", "\\", {"\\\\", ""}},
      {"escaped quote", "\\'", {"'", "\\"}},
      {"SQL injection", "'; DROP TABLE distributed_lock; --", {"'"}},
      {"SQL tautology", "\" OR 1=1 -- ", {"\" OR 1=1 --"}},
      {"SQL text", "SELECT * FROM t WHERE 1", {"select * from t where 1"}},
      {"trailing space", "a ", {"a", "a  "}},
      {"leading space", " a", {"a"}},
      {"case", "Lock", {"lock", "LOCK"}},
      {"control characters", "\t\n\r\x01\x1f\x7f", {"\t\n\r"}},
      {"placeholder and format text", "? {} %s %n {0}", {"?"}},
      {"composed vs decomposed accent", "\xc3\xa9", {"e\xcc\x81", "e", "E"}},
      {"emoji", "\xf0\x9f\x94\x92", {"\xf0\x9f\x94\x93"}},
  };
  return cases;
}

TEST(HostileNames, RejectedBeforeAnySql) {
  const Options options = fresh_options();
  DatabaseDistributedLock client(options);
  const std::vector<std::pair<const char*, std::string>> rejected = {
      {"empty", ""},
      {"a single NUL", std::string(1, '\0')},
      {"NUL inside", std::string("a\0b", 3)},
      {"NUL at the end", std::string("ab\0", 3)},
      {"256 bytes", std::string(256, 'x')},
      {"64 KiB", std::string(65536, 'x')},
  };
  for (const auto& [what, name] : rejected) {
    SCOPED_TRACE(what);
    EXPECT_THROW(client.lock(name), std::invalid_argument);
    EXPECT_THROW(client.lock(name, 5s), std::invalid_argument);
    EXPECT_THROW((void)client.try_lock(name), std::invalid_argument);
    EXPECT_THROW((void)client.try_lock(name, 1s), std::invalid_argument);
    EXPECT_THROW((void)client.try_lock(name, 1s, 5s), std::invalid_argument);
    EXPECT_THROW(client.unlock(name), std::invalid_argument);
    EXPECT_THROW(client.force_unlock(name), std::invalid_argument);
    EXPECT_THROW((void)client.is_locked(name), std::invalid_argument);
    EXPECT_THROW((void)client.is_held_by_current_thread(name), std::invalid_argument);
    EXPECT_THROW((void)client.hold_count(name), std::invalid_argument);
    EXPECT_THROW((void)client.remaining_ttl(name), std::invalid_argument);
    EXPECT_THROW((void)client.fencing_token(name), std::invalid_argument);
    EXPECT_THROW((void)client.get_lock(name), std::invalid_argument);
  }
  // Nothing reached the table, and the client is unharmed.
  EXPECT_EQ(test::query_scalar("SELECT COUNT(*) FROM `" + options.table + "`"), "0");
  client.lock("still works");
  client.unlock("still works");
}

TEST(HostileNames, StoredAndComparedByteExactly) {
  const Options options = fresh_options();
  DatabaseDistributedLock holder(options);
  DatabaseDistributedLock other(same_table(options));
  for (const auto& c : stored_cases()) {
    SCOPED_TRACE(c.what);
    holder.lock(c.name);
    // The row holds exactly these bytes, and it is the only held row.
    EXPECT_EQ(test::query_scalar("SELECT HEX(lock_name) FROM `" + options.table + "` WHERE kind = 1 AND expire_time > NOW(6)"),
              hex(c.name));
    EXPECT_EQ(test::query_scalar("SELECT COUNT(*) FROM `" + options.table + "` WHERE kind = 1 AND expire_time > NOW(6)"), "1");
    EXPECT_TRUE(other.is_locked(c.name));
    EXPECT_FALSE(other.try_lock(c.name));
    EXPECT_GE(holder.fencing_token(c.name), 1u);
    for (const auto& near : c.near_misses) {
      if (near.empty()) continue;
      EXPECT_FALSE(other.is_locked(near)) << "near miss 0x" << hex(near);
      ASSERT_TRUE(other.try_lock(near)) << "near miss 0x" << hex(near);
      other.unlock(near);
    }
    const auto fence = holder.fencing_token(c.name);
    holder.unlock(c.name);
    EXPECT_FALSE(other.is_locked(c.name));
    // Force-unlock and re-take work on the same bytes, and the fence moves on.
    ASSERT_TRUE(other.try_lock(c.name));
    EXPECT_GT(other.fencing_token(c.name), fence);
    EXPECT_TRUE(holder.force_unlock(c.name));
    EXPECT_FALSE(holder.is_locked(c.name));
    other.unlock(c.name);  // lost to the force-unlock: must not throw or free anything else
  }
}

}  // namespace
}  // namespace dlock
