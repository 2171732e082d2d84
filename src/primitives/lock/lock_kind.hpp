// The reentrant lock's kind (lock.cpp says how it takes, hands over and
// polls), open to kinds built over the lock's row: the election is this
// kind on rows of its own, with columns its take also writes and hooks
// after a take and at each polled row.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/known_rows.hpp"
#include "base/string_map.hpp"
#include "engine/hold_kind.hpp"

namespace dlock::details {

class Binder;

class LockKind : public HoldKind {
 public:
  // A column a kind over the lock writes with every take: its value in a
  // fresh row and its update when taken (`?` binds the request's value).
  struct Column {
    std::string name;
    std::string insert;
    std::string update;
  };
  struct Columns {
    // Assignments added to the take's SET (a `?` binds the request's value).
    std::string take;
    // The same for the upsert of a name's first use here.
    std::vector<Column> upsert;
  };
  // The lock's traits for rows of `kind`.
  static Traits lock_traits(Kind kind);

  LockKind(const HoldRows& rows, Traits traits, Columns columns = {});

  Taken take(KindContext& e, const AcquireRequest& r, const Holder& holder) override;
  Refusal refused(KindContext& e, const AcquireRequest& r, const Taken& t) override;
  bool hand_over(KindContext& e, Connection& c, const RowKey& row, std::uint64_t from, std::uint64_t to,
                 const AcquireRequest& request) override;
  // Returns the names held by another hold than the one the previous poll
  // saw (see lock.cpp).
  std::vector<std::string> poll(KindContext& e, Connection& c, const std::vector<std::string>& names) override;
  bool is_locked(KindContext& e, std::string_view name) override;
  std::optional<std::int64_t> ttl_us(KindContext& e, std::string_view name) override;
  // The rows of this kind this client knows exist: the multi-lock's takes
  // over the same rows share them.
  KnownRows& known_rows() { return known_; }

 protected:
  // After a take of `name` by `hold_id` succeeded (on the taking thread).
  virtual void taken(KindContext&, std::string_view /*name*/, std::uint64_t /*hold_id*/, Taken&) {}
  // The poller read `name`'s row (io thread): live or not, at `revision`;
  // poll_ended after the last row of a poll.
  virtual void polled(KindContext&, std::string_view /*name*/, bool /*live*/, std::uint64_t /*revision*/) {}
  virtual void poll_ended() {}

 private:
  static HoldRow row(KindContext& e, Kind kind, std::string_view name);
  void bind_upsert(Binder& b, KindContext& e, std::string_view name, const Holder& h, std::int64_t lease_us,
                   bool watchdog, const std::string* bell, const std::string& value) const;

  const Columns columns_;
  StringMap<std::uint64_t> polled_holds_;  // the hold each waited-for name had at the last poll (io thread)
  KnownRows known_;
  // The take of a known row, by whether it clears this client's intent and
  // whether it is a run after an unknown outcome.
  static constexpr int take_variant(bool clears_intent, bool rerun) { return (clears_intent ? 2 : 0) + (rerun ? 1 : 0); }
  std::string take_sql_[4];
  std::string upsert_sql_;
  std::string hand_over_sql_;
  std::string poll_sql_;
};

}  // namespace dlock::details
