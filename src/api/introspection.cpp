// Introspection (dlock/introspection.hpp): the query checked and turned
// into the rows' terms, the rows read (sql/activity_rows.hpp) and shown as
// the public structs. The client's member runs on its pool; the free
// function on one connection of its own.
#include "dlock/introspection.hpp"

#include <algorithm>
#include <map>
#include <stdexcept>

#include "api/tools.hpp"
#include "base/kinds_table.hpp"
#include "base/validation.hpp"
#include "dlock/distributed_lock.hpp"
#include "engine/engine.hpp"
#include "sql/activity_rows.hpp"
#include "sql/schema.hpp"

namespace dlock {

namespace {

using details::Kind;

std::optional<HoldType> type_of(Kind kind) {
  const details::KindInfo* k = details::find_kind(static_cast<std::size_t>(kind));
  return k != nullptr ? k->hold_type : std::nullopt;  // none: a row of a kind this version does not know
}

// Checked before any SQL; names deduplicated (a name asked twice is shown once).
details::ActivityFilter filter_of(const ActivityQuery& query) {
  details::ActivityFilter f;
  for (const auto& name : query.names) {
    details::validate_name(name);
    if (std::find(f.names.begin(), f.names.end(), name) == f.names.end()) f.names.push_back(name);
  }
  for (HoldType type : query.types) {
    const std::optional<Kind> known = details::kind_of(type);
    if (!known) throw std::invalid_argument("dlock: unknown HoldType " + std::to_string(static_cast<int>(type)));
    const Kind kind = *known;
    if (std::find(f.kinds.begin(), f.kinds.end(), kind) == f.kinds.end()) f.kinds.push_back(kind);
  }
  f.limit = query.limit;
  return f;
}

bool wants(const details::ActivityFilter& f, Kind kind) {
  return f.kinds.empty() || std::find(f.kinds.begin(), f.kinds.end(), kind) != f.kinds.end();
}

std::chrono::microseconds us(std::optional<std::int64_t> v) {
  return std::chrono::microseconds(std::max<std::int64_t>(0, v.value_or(0)));
}

Activity read_activity(details::Connection& c, const details::HoldRows& rows, const details::ActivityFilter& f) {
  const details::ActivityRows reads(rows);
  Activity out;
  out.server = c.server();
  out.tls_cipher = c.tls_cipher();
  for (const auto& [kind, n] : reads.count_holds(c, f))
    if (const auto type = type_of(kind)) out.held[static_cast<std::size_t>(*type)] += n;
  std::map<std::string, std::size_t> queued;
  if (wants(f, Kind::kFair)) {
    for (auto& [name, n] : reads.queue_lengths(c, f)) {
      out.waiting += n;
      queued[name] = n;
    }
    std::size_t position = 0;
    const std::string* previous = nullptr;
    for (auto& e : reads.queue_entries(c, f)) {
      position = previous != nullptr && *previous == e.name ? position + 1 : 1;
      WaiterInfo w;
      w.name = std::move(e.name);
      w.type = HoldType::kFairLock;
      w.position = position;
      w.machine = std::move(e.machine);
      w.host = std::move(e.host);
      w.pid = e.pid;
      w.owner = e.owner;
      w.waiting_since = std::move(e.since);
      w.waited_for = std::chrono::microseconds(std::max<std::int64_t>(0, e.waited_us));
      out.waiters.push_back(std::move(w));
      previous = &out.waiters.back().name;
    }
  }
  for (auto& row : reads.holds(c, f)) {
    const auto type = type_of(row.key.kind);
    if (!type || !row.live) continue;
    HoldInfo h;
    h.name = std::move(row.key.name);
    h.type = *type;
    h.slot = *type == HoldType::kSemaphore ? row.key.slot : 0;
    h.machine = std::move(row.machine);
    h.host = std::move(row.host);
    h.pid = row.pid;
    h.owner = row.owner;
    h.count = row.state;
    h.fence = row.fence;
    h.acquired_at = std::move(row.acquired_at);
    h.held_for = us(row.held_for_us);
    h.expires_in = us(row.ttl_us ? std::optional<std::int64_t>(details::owner_ttl_us(*row.ttl_us)) : std::nullopt);
    h.watchdog = row.watchdog;
    h.bound = *type == HoldType::kSemaphore ? row.bound : 0;
    if (*type == HoldType::kFairLock) {
      const auto it = queued.find(h.name);
      h.waiters = it == queued.end() ? 0 : static_cast<std::uint32_t>(it->second);
    } else {
      // A mark (a waiter elsewhere blocks on the holder's bell), a live
      // intent (a waiting client goes next), or on the write side a live
      // writers' mark: some client waits.
      h.waiters = row.marked || row.intent_id != 0 || (*type == HoldType::kWrite && row.intent_live) ? 1 : 0;
    }
    out.holds.push_back(std::move(h));
  }
  return out;
}

}  // namespace

std::string_view to_string(HoldType type) noexcept {
  const std::optional<Kind> kind = details::kind_of(type);
  return kind ? details::kind_name(*kind) : "unknown";
}

std::optional<HoldType> parse_hold_type(std::string_view text) noexcept {
  for (const auto& k : details::kKinds)
    if (k.hold_type && k.name == text) return k.hold_type;
  return std::nullopt;
}

Activity inspect(const Options& options, const ActivityQuery& query) {
  const details::ActivityFilter f = filter_of(query);
  details::validate_options(options);
  auto c = details::Connection::open(details::ConnectionSettings::from(options));
  details::CallBudget budget(options.io_timeout);
  details::Schema(options.table).prepare(*c, false);
  const details::HoldRows rows(options.table, nullptr);
  return read_activity(*c, rows, f);
}

Activity DatabaseDistributedLock::inspect(const ActivityQuery& query) {
  const details::ActivityFilter f = filter_of(query);
  details::CallBudget budget(engine_->options().io_timeout);
  return engine_->read([&](details::Connection& c) { return read_activity(c, engine_->rows(), f); });
}

}  // namespace dlock
