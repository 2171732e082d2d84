// StringMap and StringSet, no database: names are looked up by
// std::string_view without building a key, at every size.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>
#include <string>
#include <string_view>
#include <type_traits>

#include "base/string_map.hpp"

// What the header promises, checked where the compiler can: a lookup takes
// a string_view as it is, and the hash is not a nothrow one, so libstdc++
// stores each element's hash code.
static_assert(requires(dlock::details::StringMap<int> m, std::string_view v) { m.find(v); });
static_assert(requires(dlock::details::StringSet s, std::string_view v) { s.contains(v); });
static_assert(!std::is_nothrow_invocable_v<dlock::details::StringHash, std::string_view>);
#ifdef __GLIBCXX__
// Hashed at every size, not compared element by element below 21.
static_assert(std::__is_fast_hash<dlock::details::StringHash>::value);
#endif

namespace {
std::atomic<long> allocations{0};
}  // namespace

// Counts every allocation of this test program. The replacement pairs
// malloc with free, which GCC cannot see through once it inlines them.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void* operator new(std::size_t size) {
  allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

namespace dlock::details {
namespace {

// Longer than the small-string buffer: a std::string of it allocates.
const std::string_view kLongName = "orders/2026/11/customer-0123456789/invoice";

TEST(StringMap, FindsByStringViewWithoutAllocating) {
  StringMap<int> map;
  for (int i = 0; i < 16; ++i) map.emplace(std::string(kLongName) + std::to_string(i), i);
  const std::string key = std::string(kLongName) + "7";
  const std::string_view view = key;
  const long before = allocations.load();
  const auto it = map.find(view);
  const bool has = map.contains(view);
  const bool missing = map.contains(kLongName);
  EXPECT_EQ(allocations.load(), before);
  ASSERT_NE(it, map.end());
  EXPECT_EQ(it->second, 7);
  EXPECT_TRUE(has);
  EXPECT_FALSE(missing);
}

TEST(StringMap, SetFindsByStringViewWithoutAllocating) {
  StringSet set;
  set.emplace(kLongName);
  const long before = allocations.load();
  EXPECT_TRUE(set.contains(kLongName));
  EXPECT_FALSE(set.contains(kLongName.substr(1)));
  EXPECT_EQ(allocations.load(), before);
}

TEST(StringMap, BytesCountNotCharacters) {
  // Names are byte strings: an embedded NUL is part of the key.
  StringMap<int> map;
  map.emplace(std::string("a\0b", 3), 1);
  map.emplace(std::string("a"), 2);
  EXPECT_EQ(map.at(std::string("a\0b", 3)), 1);
  EXPECT_EQ(map.find(std::string_view("a\0b", 3))->second, 1);
  EXPECT_EQ(map.find(std::string_view("a"))->second, 2);
  EXPECT_FALSE(map.contains(std::string_view("a\0c", 3)));
}

}  // namespace
}  // namespace dlock::details
