#include "contenders.hpp"

#include <dlock/asio.hpp>

#include <boost/asio/use_future.hpp>

#include <cppconn/exception.h>
#include <cppconn/prepared_statement.h>
#include <cppconn/resultset.h>
#include <cppconn/statement.h>
#include <mysql_connection.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <ctime>
#include <functional>
#include <map>
#include <mutex>
#include <random>
#include <thread>
#include <unistd.h>

#include "api/tools.hpp"

namespace dlock::bench {

namespace {

using namespace std::chrono_literals;

std::unique_ptr<details::Connection> connect(const std::string& url) {
  return details::Connection::open(details::ConnectionSettings::from(Options::from_url(url)));
}

// Creates the free rows `names` of a lock-shaped `table` that are missing
// (the contenders whose take is a bare UPDATE need their row first).
void create_rows(details::Connection& c, const std::string& table, const std::vector<std::string>& names) {
  auto& ins = c.prepared("INSERT IGNORE INTO " + table + " (lock_name) VALUES (?)");
  for (const auto& n : names) {
    ins.setString(1, n);
    ins.executeUpdate();
  }
}

// ---------------------------------------------------------------- dlock

class DlockSession : public Session {
 public:
  DlockSession(DatabaseDistributedLock& client, bool lease) : client_(client), lease_(lease) {}
  void lock(const std::string& name) override {
    if (lease_) {
      client_.lock(name, std::chrono::seconds(30));
    } else {
      client_.lock(name);
    }
  }
  void unlock(const std::string& name) override { client_.unlock(name); }

 private:
  DatabaseDistributedLock& client_;
  bool lease_;
};

// The asynchronous API used the way a caller that needs the result waits
// for it: async_lock / async_unlock with use_future, for an owner of its
// own (one per session). Measures what the asynchronous path adds (a hop to
// a worker thread and back) over the synchronous call.
class DlockAsyncSession : public Session {
 public:
  explicit DlockAsyncSession(DatabaseDistributedLock& client) : client_(client), owner_(Owner::create()) {}
  void lock(const std::string& name) override {
    async_lock(client_.get_lock(name, owner_), boost::asio::use_future).get();
  }
  void unlock(const std::string& name) override {
    async_unlock(client_.get_lock(name, owner_), boost::asio::use_future).get();
  }

 private:
  DatabaseDistributedLock& client_;
  const Owner owner_;
};

// A semaphore of one permit used as a mutex: Semaphore::acquire() and
// Permit::release(), so its cycle, handoff and wake-up sit beside the lock's.
class DlockSemaphoreSession : public Session {
 public:
  explicit DlockSemaphoreSession(DatabaseDistributedLock& client) : client_(client) {}
  void lock(const std::string& name) override { permit_ = client_.get_semaphore(name, 1).acquire(); }
  void unlock(const std::string&) override { permit_.release(); }

 private:
  DatabaseDistributedLock& client_;
  Permit permit_;
};

// One side of a read-write lock used as a mutex: ReadWriteLock::read_lock()
// or write_lock(), lock() / unlock(), so its cycle and handoff sit beside
// the lock's. (Reads do not exclude each other: only the write side makes a
// handoff.) Each side has names of its own ("NAME/read", "NAME/write"), so
// the read side's cycles are reads alone and the write side's writes
// alone, nobody reading.
class DlockRwSession : public Session {
 public:
  DlockRwSession(DatabaseDistributedLock& client, Lock::Side side) : client_(client), side_(side) {}
  void lock(const std::string& name) override { side(name).lock(); }
  void unlock(const std::string& name) override { side(name).unlock(); }

 private:
  Lock side(const std::string& name) {
    const bool read = side_ == Lock::Side::kRead;
    const ReadWriteLock rw = client_.get_read_write_lock(name + (read ? "/read" : "/write"));
    return read ? rw.read_lock() : rw.write_lock();
  }
  DatabaseDistributedLock& client_;
  Lock::Side side_;
};

class DlockFairSession : public Session {
 public:
  explicit DlockFairSession(DatabaseDistributedLock& client) : client_(client) {}
  void lock(const std::string& name) override { client_.get_fair_lock(name).lock(); }
  void unlock(const std::string& name) override { client_.get_fair_lock(name).unlock(); }

 private:
  DatabaseDistributedLock& client_;
};

// An election's leadership as a lock: campaign() takes it, resign() hands
// it to the next candidate (the election's handoff).
class DlockElectionSession : public Session {
 public:
  explicit DlockElectionSession(DatabaseDistributedLock& client) : client_(client), owner_(Owner::create()) {}
  void lock(const std::string& name) override { (void)client_.get_election(name, owner_).campaign("bench"); }
  void unlock(const std::string& name) override { client_.get_election(name, owner_).resign(); }

 private:
  DatabaseDistributedLock& client_;
  Owner owner_;
};

class DlockElectionContender : public Contender {
 public:
  explicit DlockElectionContender(const std::string& url) {
    Options o = Options::from_url(url);
    o.table = "bench_dlock";
    o.pool_size = 32;
    client_ = std::make_unique<DatabaseDistributedLock>(o);
  }
  std::string name() const override { return "dlock-election"; }
  std::unique_ptr<Session> session() override { return std::make_unique<DlockElectionSession>(*client_); }

 private:
  std::unique_ptr<DatabaseDistributedLock> client_;
};

class DlockContender : public Contender {
 public:
  // `name` is the contender's report name; `tune` adjusts the options (the
  // wake-design variants).
  DlockContender(const std::string& url, bool lease, std::string name,
                 const std::function<void(Options&)>& tune = nullptr, bool async = false, bool semaphore = false,
                 Lock::Side side = Lock::Side::kMutex)
      : lease_(lease), async_(async), semaphore_(semaphore), side_(side), name_(std::move(name)) {
    Options o = Options::from_url(url);
    o.table = "bench_dlock";
    o.pool_size = 32;
    if (tune) tune(o);
    client_ = std::make_unique<DatabaseDistributedLock>(o);
  }
  std::string name() const override { return name_; }
  std::unique_ptr<Session> session() override {
    if (async_) return std::make_unique<DlockAsyncSession>(*client_);
    if (semaphore_) return std::make_unique<DlockSemaphoreSession>(*client_);
    if (side_ == Lock::Side::kFair) return std::make_unique<DlockFairSession>(*client_);
    if (side_ != Lock::Side::kMutex) return std::make_unique<DlockRwSession>(*client_, side_);
    return std::make_unique<DlockSession>(*client_, lease_);
  }
  std::unique_ptr<Session> sync_session() override { return std::make_unique<DlockSession>(*client_, lease_); }
  DatabaseDistributedLock& client() { return *client_; }

 private:
  bool lease_;
  bool async_;
  bool semaphore_;
  Lock::Side side_;
  std::string name_;
  std::unique_ptr<DatabaseDistributedLock> client_;
};

// ---------------------------------------------------------------- KILL QUERY wake
//
// The other wake design measured for issue 6, built here as a prototype on
// top of dlock with fast_wakeup off. A waiter that is refused parks a
// dedicated connection in SELECT SLEEP(1) tagged with the lock's bell
// name; a releaser, after freeing the row, looks the tagged sessions up in
// PROCESSLIST and KILL QUERYs them. The releaser cannot know whether anybody
// waits without that look-up, so it is paid on every unlock. SLEEP(1) is the
// safety net (as the poll is): a release that lands between a refused attempt
// and the SLEEP reaching the server is missed for up to a second.
class KillWakeSession : public Session {
 public:
  KillWakeSession(DatabaseDistributedLock& client, const std::string& url)
      : client_(client), sleeper_(connect(url)), control_(connect(url)) {}
  void lock(const std::string& name) override {
    const std::string tag = wake_tag(name);
    while (!client_.try_lock(name)) {
      // A plain statement, so PROCESSLIST shows the tag (a prepared one shows
      // its '?'); the tag is hex, safe to inline.
      std::unique_ptr<sql::Statement> st(sleeper_->raw_for_session_change().createStatement());
      try {
        std::unique_ptr<sql::ResultSet> rs(st->executeQuery("SELECT SLEEP(1), '" + tag + "'"));
        while (rs->next()) {
        }
      } catch (const sql::SQLException& e) {
        if (e.getErrorCode() != details::mysql_error::kQueryInterrupted) throw;  // the wake
      }
    }
  }
  void unlock(const std::string& name) override {
    client_.unlock(name);
    auto& find = control_->prepared(
        "SELECT ID FROM information_schema.PROCESSLIST WHERE STATE = 'User sleep' AND INFO LIKE ?");
    find.setString(1, "SELECT SLEEP(1), '" + wake_tag(name) + "'");
    std::vector<std::uint64_t> ids;
    {
      std::unique_ptr<sql::ResultSet> rs(find.executeQuery());
      while (rs->next()) ids.push_back(rs->getUInt64(1));
    }
    for (auto id : ids) {
      try {
        control_->execute_plain("KILL QUERY " + std::to_string(id));
      } catch (const sql::SQLException&) {
        // It woke on its own meanwhile.
      }
    }
  }

 private:
  static std::string wake_tag(const std::string& name) {
    // Hex of the name: safe to inline in the statement, and one tag per name.
    static constexpr char kHex[] = "0123456789abcdef";
    std::string tag = "wake-";
    for (unsigned char c : name) {
      tag.push_back(kHex[c >> 4]);
      tag.push_back(kHex[c & 0xf]);
    }
    return tag;
  }
  DatabaseDistributedLock& client_;
  std::unique_ptr<details::Connection> sleeper_;
  std::unique_ptr<details::Connection> control_;
};

class KillWakeContender : public Contender {
 public:
  explicit KillWakeContender(const std::string& url)
      : url_(url), dlock_(url, false, "kill-wake", [](Options& o) { o.fast_wakeup = false; }) {}
  std::string name() const override { return "kill-wake"; }
  std::unique_ptr<Session> session() override { return std::make_unique<KillWakeSession>(dlock_.client(), url_); }

 private:
  std::string url_;
  DlockContender dlock_;
};

// ---------------------------------------------------------------- floor

// The floor's cycle: a conditional UPDATE that takes the row (binds owner,
// name), one that frees it (binds name, owner); `suffix` picks the row.
struct FloorStatements {
  const char* take;
  const char* free;
  const char* suffix;
};

class FloorSession : public Session {
 public:
  FloorSession(const std::string& url, FloorStatements sql)
      : c_(connect(url)), owner_(Owner::this_thread().id()), sql_(sql) {}
  void lock(const std::string& name) override {
    auto& take = c_->prepared(sql_.take);
    for (;;) {
      take.setUInt64(1, owner_);
      take.setString(2, name + sql_.suffix);
      if (take.executeUpdate() == 1) return;
      std::this_thread::sleep_for(1ms);
    }
  }
  void unlock(const std::string& name) override {
    auto& free = c_->prepared(sql_.free);
    free.setString(1, name + sql_.suffix);
    free.setUInt64(2, owner_);
    free.executeUpdate();
  }

 private:
  std::unique_ptr<details::Connection> c_;
  std::uint64_t owner_;
  const FloorStatements sql_;
};

constexpr FloorStatements kFloor{
    "UPDATE bench_floor SET is_locked = 1, machine_id = 'floor', thread_id = ?, state = 1,"
    " expire_time = NOW(6) + INTERVAL 30 SECOND, fence = fence + 1"
    " WHERE lock_name = ? AND (is_locked = 0 OR expire_time <= NOW(6))",
    "UPDATE bench_floor SET is_locked = 0, machine_id = NULL, thread_id = NULL, state = 0, expire_time = NULL"
    " WHERE lock_name = ? AND thread_id = ?",
    ""};

// The same two statements on dlock's own table (bench_dlock, made by the
// dlock contenders), on a lock row (kind 1, slot 0) of their own per name.
// Beside the floor, it tells what the one table's key and row cost the
// server from what dlock's statements and client add.
constexpr FloorStatements kFloorOnOneTable{
    "UPDATE bench_dlock SET state = 1, machine_id = 'floor', owner_id = ?,"
    " expire_time = NOW(6) + INTERVAL 30 SECOND, fence = fence + 1"
    " WHERE kind = 1 AND lock_name = ? AND slot = 0 AND (state = 0 OR expire_time <= NOW(6))",
    "UPDATE bench_dlock SET state = 0, owner_id = 0, expire_time = NOW(6)"
    " WHERE kind = 1 AND lock_name = ? AND slot = 0 AND owner_id = ?",
    "#floor"};

class FloorContender : public Contender {
 public:
  explicit FloorContender(std::string url) : url_(std::move(url)) {
    auto c = connect(url_);
    // The lock table of dlock 0.2, which the floor has been measured on from
    // the start (its release NULLs the holder's columns, as 0.2's did).
    c->execute_plain(
        "CREATE TABLE IF NOT EXISTS bench_floor (lock_name VARBINARY(255) NOT NULL, machine_id VARBINARY(64) NULL,"
        " thread_id BIGINT UNSIGNED NULL, hold_id BIGINT UNSIGNED NULL, holder_host VARBINARY(255) NULL,"
        " holder_pid INT UNSIGNED NULL, acquired_at DATETIME(6) NULL, state INT UNSIGNED NOT NULL DEFAULT 0,"
        " is_locked TINYINT(1) NOT NULL DEFAULT 0, watchdog TINYINT(1) NOT NULL DEFAULT 0, expire_time DATETIME(6)"
        " NULL, fence BIGINT UNSIGNED NOT NULL DEFAULT 0, bell VARBINARY(64) NULL, waiters TINYINT(1) NOT NULL"
        " DEFAULT 0, gmt_create DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6), gmt_modified DATETIME(6) NOT"
        " NULL DEFAULT CURRENT_TIMESTAMP(6) ON UPDATE CURRENT_TIMESTAMP(6), PRIMARY KEY (lock_name)) ENGINE=InnoDB");
  }
  std::string name() const override { return "floor"; }
  std::unique_ptr<Session> session() override { return std::make_unique<FloorSession>(url_, kFloor); }
  void prepare(const std::vector<std::string>& names) override { create_rows(*connect(url_), "bench_floor", names); }

 private:
  std::string url_;
};

class FloorOnOneTableContender : public Contender {
 public:
  explicit FloorOnOneTableContender(std::string url) : url_(std::move(url)) {}
  std::string name() const override { return "floor-one-table"; }
  std::unique_ptr<Session> session() override { return std::make_unique<FloorSession>(url_, kFloorOnOneTable); }
  void prepare(const std::vector<std::string>& names) override {
    auto c = connect(url_);
    auto& ins = c->prepared("INSERT IGNORE INTO bench_dlock (kind, lock_name, slot) VALUES (1, ?, 0)");
    for (const auto& n : names) {
      ins.setString(1, n + kFloorOnOneTable.suffix);
      ins.executeUpdate();
    }
  }

 private:
  std::string url_;
};

// ---------------------------------------------------------------- seed

// The seed's local wait: one semaphore per name, released by a local unlock
// and by a poller that runs once a second.
struct SeedWaiters {
  std::mutex m;
  std::condition_variable cv;
  std::map<std::string, int> permits;
};

std::string client_time_plus(std::chrono::seconds lease) {
  // The seed computes expiry on the client (new Date(now + lease)).
  const std::time_t t = std::time(nullptr) + lease.count();
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

class SeedSession : public Session {
 public:
  // The seed's owner is (machineId of the server instance, thread id): the
  // process id stands in for the machine id.
  SeedSession(const std::string& url, SeedWaiters& waiters)
      : c_(connect(url)),
        waiters_(waiters),
        machine_("seed-" + std::to_string(getpid())),
        thread_(std::to_string(Owner::this_thread().id())) {
    c_->execute_plain("SET time_zone = '+00:00'");
  }
  void lock(const std::string& name) override {
    for (;;) {
      if (try_acquire(name)) return;
      // Wait for a local release or the poll (1 s), as the seed does.
      std::unique_lock<std::mutex> l(waiters_.m);
      waiters_.cv.wait_for(l, 1s, [&] { return waiters_.permits[name] > 0; });
      if (waiters_.permits[name] > 0) --waiters_.permits[name];
    }
  }
  void unlock(const std::string& name) override {
    auto& rel = c_->prepared(
        "UPDATE bench_seed SET state = state - 1, expire_time = IF(state = 0, NULL, expire_time),"
        " is_locked = IF(state = 0, 0, 1), machine_id = IF(state = 0, NULL, machine_id),"
        " thread_id = IF(state = 0, NULL, thread_id)"
        " WHERE is_deleted = 0 AND lock_name = ? AND machine_id = ? AND thread_id = ?"
        " AND expire_time > NOW() AND is_locked = 1");
    rel.setString(1, name);
    rel.setString(2, machine_);
    rel.setString(3, thread_);
    rel.executeUpdate();
    std::lock_guard<std::mutex> g(waiters_.m);
    ++waiters_.permits[name];
    waiters_.cv.notify_all();
  }

 private:
  bool try_acquire(const std::string& name) {
    auto& q = c_->prepared("SELECT id FROM bench_seed WHERE lock_name = ?");
    q.setString(1, name);
    bool exists = false;
    {
      std::unique_ptr<sql::ResultSet> rs(q.executeQuery());
      exists = rs->next();
    }
    const std::string expire = client_time_plus(std::chrono::seconds(30));
    if (!exists) {
      auto& ins = c_->prepared(
          "INSERT INTO bench_seed (lock_name, machine_id, expire_time, is_locked, state, thread_id)"
          " VALUES (?, ?, ?, 1, 1, ?)");
      ins.setString(1, name);
      ins.setString(2, machine_);
      ins.setDateTime(3, expire);
      ins.setString(4, thread_);
      try {
        ins.executeUpdate();
        return true;
      } catch (const sql::SQLException&) {
        return false;  // duplicate: someone else created it first
      }
    }
    auto& up = c_->prepared(
        "UPDATE bench_seed SET is_locked = 1, machine_id = ?, thread_id = ?,"
        " state = IF(expire_time < NOW(), 1, state + 1), expire_time = ?"
        " WHERE is_deleted = 0 AND lock_name = ?"
        " AND (expire_time < NOW() OR is_locked = 0 OR (machine_id = ? AND thread_id = ?))");
    up.setString(1, machine_);
    up.setString(2, thread_);
    up.setDateTime(3, expire);
    up.setString(4, name);
    up.setString(5, machine_);
    up.setString(6, thread_);
    if (up.executeUpdate() > 0) return true;
    // The seed reads the holder's TTL after a failed attempt.
    auto& ttl = c_->prepared("SELECT expire_time FROM bench_seed WHERE lock_name = ?");
    ttl.setString(1, name);
    std::unique_ptr<sql::ResultSet> rs(ttl.executeQuery());
    rs->next();
    return false;
  }

  std::unique_ptr<details::Connection> c_;
  SeedWaiters& waiters_;
  std::string machine_;
  std::string thread_;
};

class SeedContender : public Contender {
 public:
  explicit SeedContender(std::string url) : url_(std::move(url)) {
    connect(url_)->execute_plain(
        "CREATE TABLE IF NOT EXISTS bench_seed (id INT NOT NULL AUTO_INCREMENT, lock_name VARCHAR(255) NOT NULL,"
        " machine_id VARCHAR(255) NULL, expire_time DATETIME NULL, is_locked TINYINT NOT NULL DEFAULT 0,"
        " state INT NOT NULL DEFAULT 0, thread_id VARCHAR(255) NULL,"
        " gmt_create DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,"
        " gmt_modified DATETIME NULL ON UPDATE CURRENT_TIMESTAMP, is_deleted TINYINT NOT NULL DEFAULT 0,"
        " PRIMARY KEY (id), UNIQUE KEY idx_lock_name (lock_name)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4");
  }
  std::string name() const override { return "seed"; }
  std::unique_ptr<Session> session() override { return std::make_unique<SeedSession>(url_, waiters_); }

 private:
  std::string url_;
  SeedWaiters waiters_;
};

// ---------------------------------------------------------------- GET_LOCK

class GetLockSession : public Session {
 public:
  explicit GetLockSession(const std::string& url) : c_(connect(url)) {}
  void lock(const std::string& name) override {
    auto& ps = c_->prepared("SELECT GET_LOCK(?, 3600)");
    ps.setString(1, name);
    std::unique_ptr<sql::ResultSet> rs(ps.executeQuery());
    rs->next();
  }
  void unlock(const std::string& name) override {
    auto& ps = c_->prepared("SELECT RELEASE_LOCK(?)");
    ps.setString(1, name);
    std::unique_ptr<sql::ResultSet> rs(ps.executeQuery());
    rs->next();
  }

 private:
  std::unique_ptr<details::Connection> c_;
};

class GetLockContender : public Contender {
 public:
  explicit GetLockContender(std::string url) : url_(std::move(url)) {}
  std::string name() const override { return "get_lock"; }
  std::unique_ptr<Session> session() override { return std::make_unique<GetLockSession>(url_); }

 private:
  std::string url_;
};

}  // namespace

std::vector<std::string> rw_contender_names() { return {"dlock-read", "dlock-write", "dlock-fair"}; }

std::vector<std::string> contender_names() {
  return {"dlock-watchdog", "dlock-lease", "dlock-async", "dlock-semaphore", "dlock-no-wakeup", "floor", "seed",
          "get_lock"};
}

std::unique_ptr<Contender> make_contender(const std::string& name, const std::string& url) {
  if (name == "dlock-watchdog") return std::make_unique<DlockContender>(url, false, name);
  if (name == "dlock-lease") return std::make_unique<DlockContender>(url, true, name);
  if (name == "dlock-async") return std::make_unique<DlockContender>(url, false, name, nullptr, true);
  if (name == "dlock-semaphore") return std::make_unique<DlockContender>(url, false, name, nullptr, false, true);
  if (name == "dlock-read")
    return std::make_unique<DlockContender>(url, false, name, nullptr, false, false, Lock::Side::kRead);
  if (name == "dlock-write")
    return std::make_unique<DlockContender>(url, false, name, nullptr, false, false, Lock::Side::kWrite);
  if (name == "dlock-fair")
    return std::make_unique<DlockContender>(url, false, name, nullptr, false, false, Lock::Side::kFair);
  if (name == "dlock-election") return std::make_unique<DlockElectionContender>(url);
  // Wake designs (issue 6); dlock-no-wakeup also runs everywhere, to show
  // what the bell costs when nobody waits.
  if (name == "dlock-no-wakeup")
    return std::make_unique<DlockContender>(url, false, name, [](Options& o) { o.fast_wakeup = false; });
  if (name == "poll-10ms")
    return std::make_unique<DlockContender>(url, false, name, [](Options& o) {
      o.fast_wakeup = false;
      o.poll_interval = std::chrono::milliseconds(10);
    });
  if (name == "kill-wake") return std::make_unique<KillWakeContender>(url);
  if (name == "floor") return std::make_unique<FloorContender>(url);
  if (name == "floor-one-table") return std::make_unique<FloorOnOneTableContender>(url);
  if (name == "seed") return std::make_unique<SeedContender>(url);
  if (name == "get_lock") return std::make_unique<GetLockContender>(url);
  throw std::invalid_argument("unknown contender " + name);
}

}  // namespace dlock::bench
