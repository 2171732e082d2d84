// Hash maps and sets keyed by std::string that are looked up by
// std::string_view: StringMap<V> and StringSet.
//
// Why not std::unordered_map<std::string, V>: every operation of an
// acquire and a release looks names (and statement texts) up, and that
// container costs more there than it needs to:
//  - find(std::string(name)) builds a temporary key, which allocates once
//    the name is longer than the small-string buffer (15 bytes);
//  - with std::hash<std::string>, libstdc++ (12) searches a map of up to 20
//    elements by comparing the key with every element in turn instead of
//    hashing it, a pointer chase and a memcmp per element on the hottest
//    path (bench/results/HISTORY.md has what it cost).
// StringHash is transparent (find, count and contains take a string_view
// without building a key) and is not the standard hash, so every lookup
// hashes, whatever the size. Its call operator is deliberately not
// noexcept: libstdc++ then stores each element's hash code, so a lookup
// compares codes before bytes and never rehashes stored keys.
//
// Heterogeneous erase and operator[] are C++23/26: erase(find(name)) and
// try_emplace(std::string(name)) meanwhile.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

namespace dlock::details {

struct StringHash {
  using is_transparent = void;
  // Not noexcept on purpose (see above): it makes the containers cache
  // hash codes.
  std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

template <class V>
using StringMap = std::unordered_map<std::string, V, StringHash, std::equal_to<>>;
using StringSet = std::unordered_set<std::string, StringHash, std::equal_to<>>;

}  // namespace dlock::details
