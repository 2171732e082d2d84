// The torture worker: T threads of one process taking locks and doing a
// fenced read-modify-write on a resource row inside each critical section.
#include "api/tools.hpp"
#include "torture.hpp"

#include <dlock/asio.hpp>
#include <dlock/connector.hpp>
#include <dlock/dlock.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <cppconn/exception.h>
#include <cppconn/prepared_statement.h>
#include <cppconn/resultset.h>
#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <sys/wait.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "sql/connection.hpp"

namespace dlock::torture {
namespace {

// Appends whole lines with one write(2) each (O_APPEND): a SIGKILL never
// leaves half a line, and nothing is buffered in the process.
class History {
 public:
  explicit History(const std::string& path) : fd_(::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644)) {}
  ~History() {
    if (fd_ >= 0) ::close(fd_);
  }
  void line(const std::string& text) {
    const std::string l = text + "\n";
    if (fd_ >= 0 && ::write(fd_, l.data(), l.size()) < 0) std::perror("history");
  }

 private:
  int fd_;
};

int thread_count() {
  int n = 0;
  if (DIR* d = ::opendir("/proc/self/task")) {
    while (const dirent* e = ::readdir(d)) n += e->d_name[0] != '.';
    ::closedir(d);
  }
  return n;
}

// A joined thread leaves /proc/self/task a moment after join() returns:
// waits (up to 2 s) for the count to reach `target`, or to stop changing.
int settled_thread_count(int target) {
  int last = thread_count();
  for (int i = 0; i < 200; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    const int now = thread_count();
    if ((target > 0 && now <= target) || (target == 0 && now == last && i >= 5)) return now;
    last = now;
  }
  return last;
}

// The fenced read-modify-write every workload does inside its critical
// section. Writes begin/ok/refused/failed/unknown lines keyed by `op`.
// `pause` runs between the read and the write.
template <class Pause>
void critical_section(History& history, bool fenced, const std::string& worker,
                      const details::ConnectionSettings& settings, std::unique_ptr<details::Connection>& db,
                      const std::string& name, std::uint64_t fence, const std::string& op, Pause&& pause) {
  bool begun = false;
  try {
    if (!db || db->broken()) db = details::Connection::open(settings);
    if (fenced) {
      // Claim the resource for this fence before reading it: a stale
      // holder's late write is refused from here on, and so is any holder
      // whose fence is lower than one already seen.
      auto& claim = db->prepared("UPDATE torture_resource SET last_fence = ? WHERE name = ? AND last_fence <= ?");
      claim.setUInt64(1, fence);
      claim.setString(2, name);
      claim.setUInt64(3, fence);
      if (claim.executeUpdate() == 0) {
        history.line("claimrefused " + op);
        return;
      }
    }
    auto& read = db->prepared("SELECT counter, DATE_FORMAT(SYSDATE(6), '%Y-%m-%d %H:%i:%s.%f') FROM "
                              "torture_resource WHERE name = ?");
    read.setString(1, name);
    std::unique_ptr<sql::ResultSet> rs(read.executeQuery());
    if (!rs->next()) throw std::runtime_error("no resource row for " + name);
    const std::int64_t counter = rs->getInt64(1);
    const std::string entry = rs->getString(2);
    rs.reset();
    pause();

    history.line("begin " + op);
    begun = true;
    db->execute_plain("START TRANSACTION");
    auto& write = db->prepared(fenced ? "UPDATE torture_resource SET counter = ? WHERE name = ? AND last_fence <= ?"
                                      : "UPDATE torture_resource SET counter = ? WHERE name = ?");
    write.setInt64(1, counter + 1);
    write.setString(2, name);
    if (fenced) write.setUInt64(3, fence);
    const bool applied = write.executeUpdate() == 1;
    // seq: the counter value this write left (its place in the name's
    // commit order when applied; on a cluster the audit ids of two nodes
    // interleave and do not give that order).
    auto& audit = db->prepared(
        "INSERT INTO torture_audit (name, fence, worker, entry_time, exit_time, applied, op, seq)"
        " VALUES (?, ?, ?, ?, SYSDATE(6), ?, ?, ?)");
    audit.setString(1, name);
    audit.setUInt64(2, fence);
    audit.setString(3, worker);
    audit.setString(4, entry);
    audit.setInt(5, applied ? 1 : 0);
    audit.setString(6, op);
    audit.setInt64(7, counter + 1);
    audit.executeUpdate();
    db->execute_plain("COMMIT");
    history.line((applied ? "ok " : "refused ") + op);
  } catch (const sql::SQLException& e) {
    const bool lost = e.getErrorCode() == 0 || details::is_connection_error(e.getErrorCode());
    if (db) db->mark_broken();  // a fresh connection next time: no half transaction survives
    history.line(std::string(begun && lost ? "unknown " : "failed ") + op + " " + std::to_string(e.getErrorCode()));
  } catch (const std::exception& e) {
    if (db) db->mark_broken();
    history.line(std::string(begun ? "unknown " : "failed ") + op + " " + e.what());
  }
}

// The read section of the read-write workload: claims "w" with the read
// token (refused if a write with a higher token has claimed it), waits, and
// records the read on "v", applied only if no such write claimed "w" since.
template <class Pause>
void read_section(History& history, bool fenced, const std::string& worker,
                  const details::ConnectionSettings& settings, std::unique_ptr<details::Connection>& db,
                  std::uint64_t fence, const std::string& op, Pause&& pause) {
  bool begun = false;
  try {
    if (!db || db->broken()) db = details::Connection::open(settings);
    if (fenced) {
      auto& claim = db->prepared("UPDATE torture_resource SET last_fence = ? WHERE name = 'w' AND last_fence <= ?");
      claim.setUInt64(1, fence);
      claim.setUInt64(2, fence);
      if (claim.executeUpdate() == 0) {
        // Same value already there (another reader of this token) counts as
        // a claim too: the server reports 0 changed rows for it.
        auto& check = db->prepared("SELECT last_fence FROM torture_resource WHERE name = 'w'");
        std::unique_ptr<sql::ResultSet> rs(check.executeQuery());
        if (!rs->next() || rs->getUInt64(1) > fence) {
          history.line("claimrefused " + op);
          return;
        }
      }
    }
    auto& entry_read = db->prepared("SELECT DATE_FORMAT(SYSDATE(6), '%Y-%m-%d %H:%i:%s.%f')");
    std::unique_ptr<sql::ResultSet> rs(entry_read.executeQuery());
    rs->next();
    const std::string entry = rs->getString(1);
    rs.reset();
    pause();
    history.line("begin " + op);
    begun = true;
    db->execute_plain("START TRANSACTION");
    bool applied = true;
    if (fenced) {
      auto& last = db->prepared("SELECT last_fence FROM torture_resource WHERE name = 'w' LOCK IN SHARE MODE");
      std::unique_ptr<sql::ResultSet> l(last.executeQuery());
      applied = l->next() && l->getUInt64(1) <= fence;
    }
    if (applied) db->execute_plain("UPDATE torture_resource SET counter = counter + 1 WHERE name = 'v'");
    auto& audit = db->prepared(
        "INSERT INTO torture_audit (name, fence, worker, entry_time, exit_time, applied, op)"
        " VALUES ('v', ?, ?, ?, SYSDATE(6), ?, ?)");
    audit.setUInt64(1, fence);
    audit.setString(2, worker);
    audit.setString(3, entry);
    audit.setInt(4, applied ? 1 : 0);
    audit.setString(5, op);
    audit.executeUpdate();
    db->execute_plain("COMMIT");
    history.line((applied ? "ok " : "refused ") + op);
  } catch (const sql::SQLException& e) {
    const bool lost = e.getErrorCode() == 0 || details::is_connection_error(e.getErrorCode());
    if (db) db->mark_broken();
    history.line(std::string(begun && lost ? "unknown " : "failed ") + op + " " + std::to_string(e.getErrorCode()));
  } catch (const std::exception& e) {
    if (db) db->mark_broken();
    history.line(std::string(begun ? "unknown " : "failed ") + op + " " + e.what());
  }
}

struct Worker {
  WorkerArgs args;
  History& history;
  std::vector<std::unique_ptr<DatabaseDistributedLock>>& clients;
  details::ConnectionSettings settings;

  // The loss-order check's events (loss_order.hpp): a hold, from when its
  // acquire returned (`at`), and its owner letting it go (at the unlock call).
  // `owner`: this process's machine id and the thread's tag.
  std::string owner_of(const std::string& tag) const { return args.machine_id + ":" + tag; }
  void held(const std::string& name, std::uint64_t fence, bool shared, const std::string& who, std::int64_t at) {
    history.line("held " + name + " " + std::to_string(fence) + (shared ? " s " : " x ") + who + " " +
                 std::to_string(at));
  }
  void let_go(const std::string& name, std::uint64_t fence, const std::string& who) {
    history.line("letgo " + name + " " + std::to_string(fence) + " " + who + " " + std::to_string(now_us()));
  }

  void run_thread(int index) {
    std::mt19937 rng(static_cast<unsigned>(std::random_device{}()) + static_cast<unsigned>(index));
    std::unique_ptr<details::Connection> db;
    DatabaseDistributedLock& client = *clients[static_cast<std::size_t>(index) % clients.size()];
    const bool lease_mode = index % 2 == 1;
    // Control run only (no fence guard): every fourth hold of this thread
    // takes a lease shorter than its section, so another holder can take
    // the name and write while it still means to, the lost update the
    // checker must then report. (Pausing holders alone catches one
    // mid-write only by chance: a few a minute, none in some quick runs.)
    const bool lapsing_holds = !args.fenced && lease_mode;
    long seq = 0;
    while (now_us() < args.until_us) {
      const std::string name = "r" + std::to_string(rng() % static_cast<unsigned>(args.names));
      const bool lapsing = lapsing_holds && seq % 4 == 3;
      bool acquired = false;
      try {
        acquired = lease_mode ? client.try_lock(name, std::chrono::seconds(2),
                                                std::chrono::milliseconds(lapsing ? kLapsingLeaseMs : kLeaseMs))
                              : client.try_lock(name, std::chrono::seconds(2));
      } catch (const BackendError&) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        continue;
      }
      if (!acquired) continue;
      const std::int64_t at = now_us();
      history.line("acq " + name + " " + std::to_string(at));
      std::uint64_t fence = 0;
      try {
        fence = client.fencing_token(name);
      } catch (const BackendError&) {
      }
      held(name, fence, false, owner_of(std::to_string(index)), at);
      if (fence != 0) {
        const std::string op = args.machine_id + ":" + std::to_string(index) + ":" + std::to_string(++seq);
        const int extra = lapsing ? 2 * kLapsingLeaseMs : 0;
        critical_section(history, args.fenced, args.machine_id, settings, db, name, fence, op,
                         [&] { std::this_thread::sleep_for(std::chrono::milliseconds(1 + rng() % 8 + extra)); });
      }
      let_go(name, fence, owner_of(std::to_string(index)));
      client.unlock(name);  // never throws for database trouble
    }
  }

  // One thread of the semaphore workload: a permit of "sem", then the
  // fenced read-modify-write on its slot's resource with the slot's token.
  void run_semaphore_thread(int index) {
    std::mt19937 rng(static_cast<unsigned>(std::random_device{}()) + static_cast<unsigned>(index));
    std::unique_ptr<details::Connection> db;
    DatabaseDistributedLock& client = *clients[static_cast<std::size_t>(index) % clients.size()];
    Semaphore semaphore = client.get_semaphore("sem", kSemaphorePermits);
    const bool lease_mode = index % 2 == 1;
    long seq = 0;
    while (now_us() < args.until_us) {
      std::optional<Permit> permit;
      try {
        permit = lease_mode ? semaphore.try_acquire(std::chrono::seconds(2), std::chrono::milliseconds(kLeaseMs))
                            : semaphore.try_acquire(std::chrono::seconds(2));
      } catch (const BackendError&) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        continue;
      }
      if (!permit) continue;
      const std::int64_t at = now_us();
      std::uint64_t fence = 0;
      std::uint32_t slot = 0;
      try {
        fence = permit->fencing_token();
        slot = permit->slot();
      } catch (const BackendError&) {
      }
      const std::string name = "s" + std::to_string(slot);
      history.line("acq " + name + " " + std::to_string(at));
      const std::string who = owner_of("s" + std::to_string(index));
      // A permit whose token could not be read has no known slot: it is not
      // followed (slot() says 0 for it, which may be another permit's).
      if (fence != 0) held(name, fence, false, who, at);
      if (fence != 0) {
        const std::string op = args.machine_id + ":s" + std::to_string(index) + ":" + std::to_string(++seq);
        critical_section(history, args.fenced, args.machine_id, settings, db, name, fence, op,
                         [&] { std::this_thread::sleep_for(std::chrono::milliseconds(1 + rng() % 8)); });
      }
      if (fence != 0) let_go(name, fence, who);
      permit->release();  // never throws for database trouble
    }
  }

  // For the grant-order check (grant_order.hpp): the hold id this grant of
  // fair lock `name` carries, read from the head row while held. Nothing is
  // recorded if the read fails (a fault) or the hold is already gone.
  void record_fair_grant(std::unique_ptr<details::Connection>& db, const std::string& name, std::uint64_t fence) {
    try {
      if (!db || db->broken()) db = details::Connection::open(settings);
      auto& read = db->prepared("SELECT hold_id FROM torture_lock WHERE kind = 5 AND lock_name = ? AND slot = 0 AND"
                                " fence = ? AND expire_time > NOW(6)");
      read.setString(1, name);
      read.setUInt64(2, fence);
      std::unique_ptr<sql::ResultSet> rs(read.executeQuery());
      if (rs->next()) history.line("grant " + name + " " + std::to_string(fence) + " " + rs->getString(1));
    } catch (const std::exception&) {
      if (db) db->mark_broken();
    }
  }

  // One thread of the fair-lock workload (see kFairNames).
  void run_fair_thread(int index) {
    std::mt19937 rng(static_cast<unsigned>(std::random_device{}()) + static_cast<unsigned>(index));
    std::unique_ptr<details::Connection> db;
    DatabaseDistributedLock& client = *clients[static_cast<std::size_t>(index) % clients.size()];
    const bool lease_mode = index % 2 == 1;
    long seq = 0;
    while (now_us() < args.until_us) {
      const std::string name = "f" + std::to_string(rng() % static_cast<unsigned>(kFairNames));
      Lock fair = client.get_fair_lock(name);
      bool acquired = false;
      try {
        acquired = lease_mode ? fair.try_lock(std::chrono::seconds(2), std::chrono::milliseconds(kLeaseMs))
                              : fair.try_lock_for(std::chrono::seconds(2));
      } catch (const BackendError&) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        continue;
      }
      if (!acquired) continue;
      work_while_held(fair, name, "f" + std::to_string(index), 8, true, now_us(), db, seq, rng);
    }
  }

  // What a thread does with a lock it just acquired (at `at`): record it,
  // work on the name's resource with its fence (recording the grant first
  // for a fair lock's queue-order check), let go. `tag` names the thread in
  // operation ids ("f3", "h1"); the work pauses 1 to `max_pause_ms` ms.
  void work_while_held(Lock& lock, const std::string& name, const std::string& tag, int max_pause_ms,
                       bool record_grant, std::int64_t at, std::unique_ptr<details::Connection>& db, long& seq,
                       std::mt19937& rng) {
    history.line("acq " + name + " " + std::to_string(at));
    std::uint64_t fence = 0;
    try {
      fence = lock.fencing_token();
    } catch (const BackendError&) {
    }
    const std::string who = owner_of(tag);
    held(name, fence, false, who, at);
    if (fence != 0) {
      if (record_grant) record_fair_grant(db, name, fence);
      const std::string op = args.machine_id + ":" + tag + ":" + std::to_string(++seq);
      critical_section(history, args.fenced, args.machine_id, settings, db, name, fence, op, [&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(1 + rng() % static_cast<unsigned>(max_pause_ms)));
      });
    }
    let_go(name, fence, who);
    lock.unlock();  // never throws for database trouble
  }

  // One thread of the herd workload (see kHerdClients): its own client,
  // the lock "h0" and the fair lock "h1" in turn.
  void run_herd_thread(int index) {
    std::mt19937 rng(static_cast<unsigned>(std::random_device{}()) + static_cast<unsigned>(index));
    std::unique_ptr<details::Connection> db;
    DatabaseDistributedLock& client = *clients[static_cast<std::size_t>(index) % clients.size()];
    const bool lease_mode = index % 2 == 1;
    long seq = 0;
    for (int turn = 0; now_us() < args.until_us; ++turn) {
      const bool fair = turn % 2 == 1;
      const std::string name = kHerdNames[fair ? 1 : 0];
      Lock lock = fair ? client.get_fair_lock(name) : client.get_lock(name);
      bool acquired = false;
      const std::int64_t started = now_us();
      try {
        acquired = lease_mode ? lock.try_lock(std::chrono::seconds(20), std::chrono::milliseconds(kLeaseMs))
                              : lock.try_lock_for(std::chrono::seconds(20));
      } catch (const BackendError&) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        continue;
      }
      const std::int64_t at = now_us();
      history.line("herdwait " + name + " " + std::to_string(started) + " " + std::to_string(at));
      if (!acquired) continue;
      work_while_held(lock, name, "h" + std::to_string(index), 4, false, at, db, seq, rng);
    }
  }

  // One thread of the guarded workload (see kGuardedNames): no fence; the
  // guard alone keeps a transaction whose hold was lost from committing
  // (the control run leaves it out).
  void run_guarded_thread(int index) {
    std::mt19937 rng(static_cast<unsigned>(std::random_device{}()) + static_cast<unsigned>(index));
    std::unique_ptr<details::Connection> db;
    DatabaseDistributedLock& client = *clients[static_cast<std::size_t>(index) % clients.size()];
    long seq = 0;
    while (now_us() < args.until_us) {
      const std::string name = "g" + std::to_string(rng() % static_cast<unsigned>(kGuardedNames));
      Lock lock = client.get_lock(name);
      bool acquired = false;
      try {
        acquired = lock.try_lock(std::chrono::seconds(2), std::chrono::milliseconds(kLeaseMs));
      } catch (const BackendError&) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        continue;
      }
      if (!acquired) continue;
      const std::int64_t at = now_us();
      history.line("acq " + name + " " + std::to_string(at));
      std::uint64_t fence = 0;
      try {
        fence = lock.fencing_token();  // for the loss-order check only
      } catch (const BackendError&) {
      }
      const std::string who = owner_of("g" + std::to_string(index));
      held(name, fence, false, who, at);
      const std::string op = args.machine_id + ":g" + std::to_string(index) + ":" + std::to_string(++seq);
      // One section in ten pauses past the lease: before the write or after it.
      const int stall = rng() % 20;
      guarded_section(db, name, lock, op, [&](bool after_write) {
        const bool long_pause = stall == (after_write ? 1 : 0);
        std::this_thread::sleep_for(std::chrono::milliseconds(long_pause ? kLeaseMs + 500 : 1 + rng() % 4));
      });
      let_go(name, fence, who);
      lock.unlock();  // never throws for database trouble
    }
  }

  // The guarded read-modify-write of `name`'s counter: read, pause(false),
  // write and audit, pause(true), guard (not in the control run), commit.
  template <class Pause>
  void guarded_section(std::unique_ptr<details::Connection>& db, const std::string& name, const Lock& lock,
                       const std::string& op, Pause&& pause) {
    bool begun = false;
    try {
      if (!db || db->broken()) db = details::Connection::open(settings);
      sql::Connection& raw = db->raw_for_session_change();
      db->execute_plain("START TRANSACTION");
      auto& read = db->prepared("SELECT counter, DATE_FORMAT(SYSDATE(6), '%Y-%m-%d %H:%i:%s.%f') FROM "
                                "torture_resource WHERE name = ?");
      read.setString(1, name);
      std::unique_ptr<sql::ResultSet> rs(read.executeQuery());
      if (!rs->next()) throw std::runtime_error("no resource row for " + name);
      const std::int64_t counter = rs->getInt64(1);
      const std::string entry = rs->getString(2);
      rs.reset();
      pause(false);
      history.line("begin " + op);
      begun = true;
      auto& write = db->prepared("UPDATE torture_resource SET counter = ? WHERE name = ?");
      write.setInt64(1, counter + 1);
      write.setString(2, name);
      write.executeUpdate();
      auto& audit = db->prepared(
          "INSERT INTO torture_audit (name, fence, worker, entry_time, exit_time, applied, op, seq)"
          " VALUES (?, 0, ?, ?, SYSDATE(6), 1, ?, ?)");
      audit.setString(1, name);
      audit.setString(2, args.machine_id);
      audit.setString(3, entry);
      audit.setString(4, op);
      audit.setInt64(5, counter + 1);
      audit.executeUpdate();
      pause(true);
      if (args.fenced) guard(raw, lock);  // the control run commits unguarded
      db->execute_plain("COMMIT");
      history.line("ok " + op);
    } catch (const LockLostError&) {
      try {
        db->execute_plain("ROLLBACK");
      } catch (const std::exception&) {
        db->mark_broken();
      }
      history.line("refused " + op);  // rolled back: the hold was not live
    } catch (const sql::SQLException& e) {
      const bool lost = e.getErrorCode() == 0 || details::is_connection_error(e.getErrorCode());
      if (db) db->mark_broken();  // a fresh connection next time: the server rolls the transaction back
      history.line(std::string(begun && lost ? "unknown " : "failed ") + op + " " + std::to_string(e.getErrorCode()));
    } catch (const std::exception& e) {
      if (db) db->mark_broken();
      history.line(std::string(begun ? "unknown " : "failed ") + op + " " + e.what());
    }
  }

  // One candidate of the election workload (see kElectionName).
  void run_election_thread(int index) {
    std::mt19937 rng(static_cast<unsigned>(std::random_device{}()) + static_cast<unsigned>(index));
    std::unique_ptr<details::Connection> db;
    DatabaseDistributedLock& client = *clients[static_cast<std::size_t>(index) % clients.size()];
    Election election = client.get_election(kElectionName, Owner::create());
    const std::string value = args.machine_id + "/" + std::to_string(index);
    long seq = 0;
    while (now_us() < args.until_us) {
      std::optional<std::uint64_t> term;
      try {
        term = election.try_campaign(value, std::chrono::seconds(2));
      } catch (const LockLostError&) {
        election.resign();  // a leadership lost under a pause: owed its resign
        continue;
      } catch (const BackendError&) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        continue;
      }
      if (!term) continue;
      const std::int64_t at = now_us();
      history.line("acq " + std::string(kElectionName) + " " + std::to_string(at));
      const std::string who = owner_of("e" + std::to_string(index));
      held(kElectionName, *term, false, who, at);
      const std::string op = args.machine_id + ":e" + std::to_string(index) + ":" + std::to_string(++seq);
      critical_section(history, args.fenced, args.machine_id, settings, db, kElectionName, *term, op,
                       [&] { std::this_thread::sleep_for(std::chrono::milliseconds(1 + rng() % 8)); });
      let_go(kElectionName, *term, who);
      election.resign();  // never throws for database trouble
    }
  }

  // One thread of the multi-lock workload (see kMultiNames).
  void run_multi_thread(int index) {
    std::mt19937 rng(static_cast<unsigned>(std::random_device{}()) + static_cast<unsigned>(index));
    std::unique_ptr<details::Connection> db;
    DatabaseDistributedLock& client = *clients[static_cast<std::size_t>(index) % clients.size()];
    const bool lease_mode = index % 2 == 1;
    const std::uint64_t owner = Owner::this_thread().id();
    long seq = 0;
    while (now_us() < args.until_us) {
      std::vector<std::string> names;
      for (int i = 0; i < kMultiNames; ++i) names.push_back("m" + std::to_string(i));
      std::shuffle(names.begin(), names.end(), rng);
      names.resize(2 + rng() % 7);
      MultiLock set = client.get_multi_lock(names);
      const auto asked = std::chrono::steady_clock::now();
      bool acquired = false;
      try {
        acquired = lease_mode ? set.try_lock(std::chrono::seconds(2), std::chrono::milliseconds(kLeaseMs))
                              : set.try_lock_for(std::chrono::seconds(2));
      } catch (const BackendError&) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        continue;
      }
      if (!acquired) continue;
      const std::int64_t at = now_us();
      const std::string op = args.machine_id + ":m" + std::to_string(index) + ":" + std::to_string(++seq);
      const std::string who = owner_of("m" + std::to_string(index));
      std::vector<std::uint64_t> fences;
      try {
        // Every name of the set is this thread's in the table. Only checked
        // while no lease can have run out since the acquire began (a pause
        // of the process may end a hold legitimately).
        if (!db || db->broken()) db = details::Connection::open(settings);
        std::string in;
        for (std::size_t i = 0; i < names.size(); ++i) in += i == 0 ? "?" : ", ?";
        auto& held = db->prepared("SELECT COUNT(*) FROM torture_lock WHERE kind = 1 AND slot = 0 AND lock_name IN (" +
                                  in + ") AND state > 0 AND expire_time > NOW(6) AND machine_id = ? AND owner_id = ?"
                                  " AND holder_pid = ?");
        int k = 1;
        for (const auto& n : names) held.setString(static_cast<unsigned>(k++), n);
        held.setString(static_cast<unsigned>(k++), args.label);
        held.setUInt64(static_cast<unsigned>(k++), owner);
        held.setUInt64(static_cast<unsigned>(k), static_cast<std::uint64_t>(::getpid()));
        std::unique_ptr<sql::ResultSet> rs(held.executeQuery());
        const long count = rs->next() ? rs->getInt64(1) : -1;
        rs.reset();
        const auto took = std::chrono::steady_clock::now() - asked;
        if (count != static_cast<long>(names.size()) && took < std::chrono::milliseconds(kWatchdogMs / 2))
          history.line("partial " + op + " " + std::to_string(count) + "/" + std::to_string(names.size()));
      } catch (const std::exception&) {
        if (db) db->mark_broken();
      }
      for (const auto& name : names) {
        std::uint64_t fence = 0;
        try {
          fence = set.fencing_token(name);
        } catch (const BackendError&) {
        }
        fences.push_back(fence);
        held(name, fence, false, who, at);
        if (fence == 0) continue;
        history.line("acq " + name + " " + std::to_string(now_us()));
        critical_section(history, args.fenced, args.machine_id, settings, db, name, fence, op + ":" + name,
                         [&] { std::this_thread::sleep_for(std::chrono::milliseconds(rng() % 3)); });
      }
      for (std::size_t i = 0; i < names.size(); ++i) let_go(names[i], fences[i], who);
      set.unlock();  // never throws for database trouble
    }
  }

  // One thread of the read-write workload: mostly reads, one in four a
  // write, of read-write lock "rw".
  void run_rw_thread(int index) {
    std::mt19937 rng(static_cast<unsigned>(std::random_device{}()) + static_cast<unsigned>(index));
    std::unique_ptr<details::Connection> db;
    // args.threads of them per client (see main): local writers contend.
    DatabaseDistributedLock& client =
        *clients[static_cast<std::size_t>(index / std::max(1, args.threads)) % clients.size()];
    const ReadWriteLock rw = client.get_read_write_lock("rw");
    const bool lease_mode = index % 2 == 1;
    // Control run only (no fence guard): this thread's reads take a lease
    // shorter than their section, so a writer can be granted the lock while
    // they still read, the overlap the checker must then report. (Pauses
    // alone rarely produce one: a writer gets in only once every read of
    // both processes has ended or lapsed.)
    const bool lapsing_reads = !args.fenced && lease_mode;
    long seq = 0;
    while (now_us() < args.until_us) {
      const bool write = rng() % 4 == 0;
      Lock side = write ? rw.write_lock() : rw.read_lock();
      const auto lease = std::chrono::milliseconds(lapsing_reads && !write ? kLapsingLeaseMs : kLeaseMs);
      bool acquired = false;
      try {
        acquired = lease_mode ? side.try_lock(std::chrono::seconds(2), lease)
                              : side.try_lock_for(std::chrono::seconds(2));
      } catch (const BackendError&) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        continue;
      }
      if (!acquired) continue;
      const std::int64_t at = now_us();
      const std::string name = write ? "w" : "v";
      history.line("acq " + name + " " + std::to_string(at));
      std::uint64_t fence = 0;
      try {
        fence = side.fencing_token();
      } catch (const BackendError&) {
      }
      const std::string who = owner_of("rw" + std::to_string(index));
      held("rw", fence, !write, who, at);
      if (fence != 0) {
        const std::string op = args.machine_id + ":" + name + std::to_string(index) + ":" + std::to_string(++seq);
        const auto pause = [&] {
          const auto extra = lapsing_reads && !write ? 2 * kLapsingLeaseMs : 0;
          std::this_thread::sleep_for(std::chrono::milliseconds(1 + rng() % 8 + extra));
        };
        if (write) {
          critical_section(history, args.fenced, args.machine_id, settings, db, name, fence, op, pause);
        } else {
          read_section(history, args.fenced, args.machine_id, settings, db, fence, op, pause);
        }
      }
      let_go("rw", fence, who);
      side.unlock();  // never throws for database trouble
    }
  }

  // One coroutine of the asynchronous workload: an owner of its own, so its
  // holds follow it whichever io thread resumes it.
  boost::asio::awaitable<void> run_coroutine(int index) {
    namespace asio = boost::asio;
    std::mt19937 rng(static_cast<unsigned>(std::random_device{}()) + static_cast<unsigned>(index));
    std::unique_ptr<details::Connection> db;
    DatabaseDistributedLock& client = *clients[static_cast<std::size_t>(index) % clients.size()];
    const Owner owner = Owner::create();
    const bool lease_mode = index % 2 == 1;
    asio::steady_timer backoff(co_await asio::this_coro::executor);
    long seq = 0;
    while (now_us() < args.until_us) {
      const std::string name = "r" + std::to_string(rng() % static_cast<unsigned>(args.names));
      Lock lock = client.get_lock(name, owner);
      bool acquired = false;
      bool failed = false;
      try {
        acquired = lease_mode ? co_await async_try_lock(lock, std::chrono::seconds(2),
                                                        std::chrono::milliseconds(kLeaseMs), asio::use_awaitable)
                              : co_await async_try_lock(lock, std::chrono::seconds(2), asio::use_awaitable);
      } catch (const BackendError&) {
        failed = true;
      }
      if (failed) {
        backoff.expires_after(std::chrono::milliseconds(50));
        co_await backoff.async_wait(asio::use_awaitable);
        continue;
      }
      if (!acquired) continue;
      const std::int64_t at = now_us();
      history.line("acq " + name + " " + std::to_string(at));
      std::uint64_t fence = 0;
      try {
        fence = lock.fencing_token();
      } catch (const BackendError&) {
      }
      const std::string who = owner_of("a" + std::to_string(index));
      held(name, fence, false, who, at);
      if (fence != 0) {
        const std::string op = args.machine_id + ":a" + std::to_string(index) + ":" + std::to_string(++seq);
        // Blocking SQL on the io thread: the workload's own resource, not
        // the library's (its statements run on its workers).
        critical_section(history, args.fenced, args.machine_id, settings, db, name, fence, op,
                         [&] { std::this_thread::sleep_for(std::chrono::milliseconds(1 + rng() % 8)); });
      }
      let_go(name, fence, who);
      co_await async_unlock(lock, asio::use_awaitable);  // database trouble is logged, not thrown
    }
  }

  void run_async() {
    boost::asio::io_context io;
    for (int c = 0; c < 3 * args.threads; ++c) {
      boost::asio::co_spawn(io, run_coroutine(c), [this](std::exception_ptr e) {
        if (!e) return;
        try {
          std::rethrow_exception(e);
        } catch (const std::exception& x) {
          history.line(std::string("crash coroutine ") + x.what());
        }
      });
    }
    std::thread second([&io] { io.run(); });
    io.run();
    second.join();
  }
};

}  // namespace

int run_worker(const WorkerArgs& args) {
  // Library warnings (lost holds, retries) go to this worker's log file.
  if (!args.log_path.empty() && std::freopen(args.log_path.c_str(), "a", stderr) == nullptr) return 3;
  // Counted before the client exists. TSan's runtime starts a background
  // thread of its own at the first pthread_create; a throwaway thread makes
  // it start now, so the baseline includes it.
  std::thread([] {}).join();
  const int baseline = settled_thread_count(0);
  {
    Options options = Options::from_url(args.url);
    options.table = "torture_lock";
    options.machine_id = args.label;
    options.watchdog_timeout = std::chrono::milliseconds(kWatchdogMs);
    options.poll_interval = std::chrono::milliseconds(kPollMs);
    options.io_timeout = std::chrono::milliseconds(2000);
    options.connect_timeout = std::chrono::milliseconds(2000);
    options.pool_size = static_cast<std::size_t>(args.pool_size);
    History history(args.history_path);
    // The loss-order check's third event: when this process was told. The
    // control run tells 5 s late, as a client whose loss waited behind a
    // hung statement did: the check must catch it.
    const std::int64_t told_late_us = args.fenced ? 0 : 5'000'000;
    options.on_lock_lost = [&history, process = args.machine_id, told_late_us](std::string_view name,
                                                                                 std::uint64_t fence) {
      history.line("lost " + std::string(name) + " " + std::to_string(fence) + " " + process + " " +
                   std::to_string(now_us() + told_late_us));
    };
    std::vector<std::unique_ptr<DatabaseDistributedLock>> clients;
    while (static_cast<int>(clients.size()) < args.clients) {  // the server may be down or paused at start-up
      try {
        clients.push_back(std::make_unique<DatabaseDistributedLock>(options));
      } catch (const BackendError&) {
        if (now_us() >= args.until_us) return 0;
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
      }
    }
    Worker worker{args, history, clients, details::ConnectionSettings::from(options)};
    if (args.async) {
      worker.run_async();
    } else {
      std::vector<std::thread> threads;
      // The read-write workload runs its threads on every client (one
      // client's threads contend locally, so the write side is handed from
      // one to another); the semaphore workload runs more threads than
      // permits (so they wait, and permits are handed from one to another);
      // the fair-lock workload runs twice as many on every client (so its
      // queues hold several waiters of several processes); the others
      // spread their threads over the clients (the herd workload: one
      // thread per client).
      const int count = args.herd   ? static_cast<int>(clients.size())
                        : args.fair ? 2 * args.threads * static_cast<int>(clients.size())
                        : args.rw || args.election ? args.threads * static_cast<int>(clients.size())
                        : args.semaphore ? args.threads + kSemaphorePermits
                                         : args.threads;
      for (int t = 0; t < count; ++t) {
        if (args.herd) {
          threads.emplace_back([&worker, t] { worker.run_herd_thread(t); });
        } else if (args.guarded) {
          threads.emplace_back([&worker, t] { worker.run_guarded_thread(t); });
        } else if (args.election) {
          threads.emplace_back([&worker, t] { worker.run_election_thread(t); });
        } else if (args.fair) {
          threads.emplace_back([&worker, t] { worker.run_fair_thread(t); });
        } else if (args.multi) {
          threads.emplace_back([&worker, t] { worker.run_multi_thread(t); });
        } else if (args.rw) {
          threads.emplace_back([&worker, t] { worker.run_rw_thread(t); });
        } else if (args.semaphore) {
          threads.emplace_back([&worker, t] { worker.run_semaphore_thread(t); });
        } else {
          threads.emplace_back([&worker, t] { worker.run_thread(t); });
        }
      }
      for (auto& t : threads) t.join();
    }
    // Holds handed straight from one local owner to another (the direct
    // handoff path), for the report: the run must exercise it.
    std::uint64_t handoffs = 0;
    for (auto& c : clients) handoffs += details::EngineAccess::of(*c).handoffs();
    std::cout << "handoffs " << handoffs << std::endl;
  }
  // The client is gone: every thread it started must be gone too.
  std::cout << "threads left " << settled_thread_count(baseline) - baseline << std::endl;
  return 0;
}

namespace {

// Field `field` (1-based, after the command name) of /proc/PID/stat; "" if gone.
std::string proc_stat(pid_t pid, int field) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto close = text.rfind(')');
  if (close == std::string::npos) return "";
  std::istringstream rest(text.substr(close + 2));
  std::string value;
  for (int i = 0; i < field && rest >> value; ++i) {
  }
  return value;
}

// The ancestor of this process whose parent is `grandparent` (the dlock
// process the CLI worker started), 0 if none.
pid_t ancestor_under(pid_t grandparent) {
  pid_t pid = ::getppid();
  for (int depth = 0; depth < 8 && pid > 1; ++depth) {
    const std::string parent = proc_stat(pid, 2);
    if (parent.empty()) return 0;
    if (static_cast<pid_t>(std::stol(parent)) == grandparent) return pid;
    pid = static_cast<pid_t>(std::stol(parent));
  }
  return 0;
}

bool gone(pid_t pid) {
  const std::string state = proc_stat(pid, 1);
  return state.empty() || state == "Z" || state == "X";
}

}  // namespace

int run_cli_step(const std::string& url, const std::string& name, const std::string& op,
                 const std::string& history_path, bool fenced, int cli_worker) {
  const pid_t dlock = ancestor_under(static_cast<pid_t>(cli_worker));
  const char* fence_text = std::getenv("DLOCK_FENCE");
  const std::uint64_t fence = fence_text != nullptr ? std::stoull(fence_text) : 0;
  History history(history_path);
  history.line("acq " + name + " " + std::to_string(now_us()));
  if (fence == 0) return 1;
  std::mt19937 rng(static_cast<unsigned>(std::random_device{}()));
  Options options = Options::from_url(url);
  options.io_timeout = std::chrono::milliseconds(2000);
  std::unique_ptr<details::Connection> db;
  const auto worker = op.substr(0, op.find(':'));
  critical_section(history, fenced, worker, details::ConnectionSettings::from(options), db, name, fence, op, [&] {
    bool orphaned = false;
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(200 + rng() % 400);
    while (std::chrono::steady_clock::now() < end) {
      if (!orphaned && (dlock == 0 || gone(dlock))) {
        // The keeper kills this group when it sees dlock gone, which takes
        // it a poll tick (longer under a sanitizer): only a command still
        // running a second later has outlived its dlock.
        std::this_thread::sleep_for(std::chrono::seconds(1));
        orphaned = true;
        history.line("orphan " + op);
        // Keep going unprotected, past the lease, as a real command would.
        std::this_thread::sleep_for(std::chrono::milliseconds(kWatchdogMs + 500));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  return 0;
}

int run_cli_worker(const CliWorkerArgs& args) {
  std::mt19937 rng(static_cast<unsigned>(std::random_device{}()));
  long seq = 0;
  while (now_us() < args.until_us) {
    const std::string name = "r" + std::to_string(rng() % static_cast<unsigned>(args.names));
    const std::string op = args.id + ":cli:" + std::to_string(++seq);
    std::vector<std::string> argv{args.dlock, "--url", args.url, "run", "--wait", "2s", name, "--",
                                  args.self, "--cli-step", args.url, name, op, args.history_path,
                                  args.fenced ? "1" : "0", std::to_string(::getpid())};
    std::vector<char*> a;
    for (auto& x : argv) a.push_back(x.data());
    a.push_back(nullptr);
    const pid_t pid = ::fork();
    if (pid == 0) {
      // The step's output would only clutter the orchestrator's.
      const int null = ::open("/dev/null", O_WRONLY);
      if (null >= 0) {
        ::dup2(null, 1);
        ::dup2(null, 2);
      }
      ::execv(a[0], a.data());
      ::_exit(127);
    }
    if (pid < 0) return 1;
    {
      std::ofstream(args.pid_path) << pid << "\n";
    }
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    std::remove(args.pid_path.c_str());
  }
  return 0;
}

}  // namespace dlock::torture
