#include "primitives/multi_lock/lock_set.hpp"

#include <cppconn/prepared_statement.h>
#include <cppconn/resultset.h>

#include <algorithm>

#include "base/kinds_table.hpp"

#include "engine/engine.hpp"
#include "sql/bells.hpp"
#include "sql/statement.hpp"

namespace dlock::details {

namespace {

// The IN list's placeholders, padded to a bucket (statement.hpp).
std::string in_list(std::size_t n) { return "(" + placeholders(in_list_bucket(n)) + ")"; }

void bind_names(Binder& b, const std::vector<std::string>& names) {
  bind_texts(b, names, 0, names.size(), in_list_bucket(names.size()));
}

}  // namespace

LockSet::LockSet(const HoldRows& rows, KnownRows& known) : known_(known), quoted_(rows.quoted()) {
  const std::string& q = quoted_;
  const std::string lock_rows = " WHERE kind = " + kind_sql(Kind::kLock) + " AND slot = 0 AND lock_name IN ";
  // Each fresh row is taken as the lock's own take would (the same
  // assignments and the same rule: free or expired, or already carrying
  // this hold id after an unknown outcome; no other client's mark live).
  take_sql_ = "UPDATE " + q + " SET " + fragments::take_assignments("", "fence + 1") +
              ", intent_id = IF(intent_id = ?, 0, intent_id)" + lock_rows;
  look_sql_ = "SELECT lock_name, " + fragments::live() + ", TIMESTAMPDIFF(MICROSECOND, NOW(6), expire_time), hold_id, " +
              "IF(intent_expire > NOW(6) AND intent_id <> ?, TIMESTAMPDIFF(MICROSECOND, NOW(6), intent_expire), 0) FROM " +
              q + lock_rows;
}

void LockSet::make_rows(Engine& e, const std::vector<std::string>& names) {
  std::vector<std::string> missing;
  for (const auto& n : names)
    if (!known_.contains(n)) missing.push_back(n);
  if (missing.empty()) return;
  // One idempotent statement (an existing row is left as it is; a row made
  // here is free, its lease in the past by the columns' defaults): safe to
  // repeat after an unknown outcome.
  const auto statement = [&](Connection& c) {
    e.rows().update(
        c, "making lock rows",
        "INSERT INTO " + quoted_ + " (kind, lock_name, slot) VALUES " +
            [&] {
              std::string v;
              for (std::size_t i = 0; i < in_list_bucket(missing.size()); ++i)
                v += (i == 0 ? "(" : ", (") + kind_sql(Kind::kLock) + ", ?, 0)";
              return v;
            }() +
            " ON DUPLICATE KEY UPDATE slot = slot",
        [&](Binder& b) { bind_names(b, missing); });
    return true;
  };
  e.run_reconciled(missing.front(), statement, [](Connection&) { return Engine::Verdict::kRunAgain; });
  for (const auto& n : missing) known_.add(n);
}

bool LockSet::run(Engine& e, Connection& c, const std::vector<std::string>& fresh,
                  const std::vector<Member>& again, const Holder& holder, std::int64_t lease_us, bool watchdog,
                  const std::string* bell, std::optional<std::string>& lost) const {
  // A deadlock or lock wait timeout rolls the whole transaction back; the
  // retry rule of run() runs it again from its start.
  return e.rows().run(c, "taking a set of locks", [&]() -> std::int64_t {
           lost.reset();
           c.execute_plain("START TRANSACTION");
           try {
             bool all = true;
             if (!fresh.empty()) {
               auto& ps = c.prepared(take_sql_ + in_list(fresh.size()) + " AND (expire_time <= NOW(6) OR hold_id = ?) AND " +
                                     fragments::no_foreign_intent());
               Binder b(ps);
               bind_hold(b, holder, 1, lease_us, watchdog, bell);
               b.u64(e.client_key());
               bind_names(b, fresh);
               b.u64(holder.hold_id).u64(e.client_key());
               all = execute_update(ps) == static_cast<std::int64_t>(fresh.size());
             }
             for (std::size_t i = 0; all && i < again.size(); ++i) {
               const RowKey row{Kind::kLock, again[i].name, 0};
               if (!e.rows().retake_once(c, row, again[i].hold_id, again[i].count, lease_us, watchdog)) {
                 lost = again[i].name;
                 all = false;
               }
             }
             c.execute_plain(all ? "COMMIT" : "ROLLBACK");
             return all ? 1 : 0;
           } catch (...) {
             try {
               c.execute_plain("ROLLBACK");
             } catch (const std::exception&) {
               c.mark_broken();
             }
             throw;
           }
         }) > 0;
}

LockSet::Taken LockSet::take(Engine& e, const std::vector<Member>& members, const Holder& holder,
                             std::int64_t lease_us, bool watchdog) {
  std::vector<std::string> fresh;
  std::vector<Member> again;
  for (const auto& m : members) {
    if (m.hold_id == 0) {
      fresh.push_back(m.name);
    } else {
      again.push_back(m);
    }
  }
  make_rows(e, fresh);
  Taken t;
  const auto statement = [&](Connection& c) {
    const std::string* bell = e.options().fast_wakeup && !fresh.empty() ? take_session_bell(c, e.logger()) : nullptr;
    const bool taken = run(e, c, fresh, again, holder, lease_us, watchdog, bell, t.lost);
    t.bell_session = bell != nullptr && taken ? c.session_key() : 0;
    return taken;
  };
  t.taken = e.run_reconciled(members.front().name, statement, [&](Connection& c) {
    t.bell_session = 0;  // the session died, and its bell with it
    // The transaction applied as a whole or not at all: one fresh row
    // carrying the hold id tells. Without fresh rows, the counts are
    // absolute: running it again applies them once.
    if (!fresh.empty() && e.rows().find(c, Kind::kLock, fresh.front(), holder.hold_id))
      return Engine::Verdict::kApplied;
    return Engine::Verdict::kRunAgain;
  });
  if (!t.taken && !t.lost && !fresh.empty()) look(e, fresh, t);
  return t;
}

void LockSet::look(Engine& e, const std::vector<std::string>& fresh, Taken& t) {
  std::vector<std::string> seen;
  std::int64_t first_end = -1;
  const auto ends_in = [&](std::int64_t us) { first_end = first_end < 0 ? us : std::min(first_end, us); };
  e.read([&](Connection& c) {
    seen.clear();
    t.foreign.clear();
    first_end = -1;
    return e.rows().query(
        c, "reading a set of locks", look_sql_ + in_list(fresh.size()),
        [&](Binder& b) {
          b.u64(e.client_key());
          bind_names(b, fresh);
        },
        [&](sql::ResultSet& rs) {
          while (rs.next()) {
            std::string name = rs.getString(1);
            if (rs.getInt(2) == 1) {
              ends_in(std::max<std::int64_t>(0, rs.getInt64(3)));
              if (!e.is_this_clients(rs.getUInt64(4))) t.foreign.push_back(name);
            } else if (const std::int64_t mark = rs.getInt64(5); mark > 0) {
              ends_in(mark);  // free, but another client's waiter goes next
            }
            seen.push_back(std::move(name));
          }
        });
  });
  // A row deleted behind this client's back is made again next time.
  for (const auto& n : fresh)
    if (std::find(seen.begin(), seen.end(), n) == seen.end()) known_.forget(n);
  t.ttl_us = std::max<std::int64_t>(0, first_end);
}

}  // namespace dlock::details
