// The torture worker: T threads of one process taking locks and doing a
// fenced read-modify-write on a resource row inside each critical section.
#include "torture.hpp"

#include <dlock/dlock.hpp>

#include <cppconn/exception.h>
#include <cppconn/prepared_statement.h>
#include <cppconn/resultset.h>
#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "connection.hpp"

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

struct Worker {
  WorkerArgs args;
  History history;
  DatabaseDistributedLock& client;
  details::ConnectionSettings settings;

  // One critical section on `name` with `fence`. Writes begin/ok/refused/
  // failed/unknown lines keyed by `op`.
  void critical_section(std::unique_ptr<details::Connection>& db, const std::string& name, std::uint64_t fence,
                        const std::string& op, std::mt19937& rng) {
    bool begun = false;
    try {
      if (!db || db->broken()) db = details::Connection::open(settings);
      if (args.fenced) {
        // Claim the resource for this fence before reading it: a stale
        // holder's late write is refused from here on, and so is any
        // holder whose fence is lower than one already seen.
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
      std::this_thread::sleep_for(std::chrono::milliseconds(1 + rng() % 8));

      history.line("begin " + op);
      begun = true;
      db->execute_plain("START TRANSACTION");
      auto& write = db->prepared(args.fenced ? "UPDATE torture_resource SET counter = ? WHERE name = ? AND last_fence <= ?"
                                             : "UPDATE torture_resource SET counter = ? WHERE name = ?");
      write.setInt64(1, counter + 1);
      write.setString(2, name);
      if (args.fenced) write.setUInt64(3, fence);
      const bool applied = write.executeUpdate() == 1;
      auto& audit = db->prepared(
          "INSERT INTO torture_audit (name, fence, worker, entry_time, exit_time, applied, op)"
          " VALUES (?, ?, ?, ?, SYSDATE(6), ?, ?)");
      audit.setString(1, name);
      audit.setUInt64(2, fence);
      audit.setString(3, args.machine_id);
      audit.setString(4, entry);
      audit.setInt(5, applied ? 1 : 0);
      audit.setString(6, op);
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

  void run_thread(int index) {
    std::mt19937 rng(static_cast<unsigned>(std::random_device{}()) + static_cast<unsigned>(index));
    std::unique_ptr<details::Connection> db;
    const bool lease_mode = index % 2 == 1;
    long seq = 0;
    while (now_us() < args.until_us) {
      const std::string name = "r" + std::to_string(rng() % static_cast<unsigned>(args.names));
      bool acquired = false;
      try {
        acquired = lease_mode ? client.try_lock(name, std::chrono::seconds(2), std::chrono::milliseconds(kLeaseMs))
                              : client.try_lock(name, std::chrono::seconds(2));
      } catch (const BackendError&) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        continue;
      }
      if (!acquired) continue;
      history.line("acq " + name + " " + std::to_string(now_us()));
      std::uint64_t fence = 0;
      try {
        fence = client.fencing_token(name);
      } catch (const BackendError&) {
      }
      if (fence != 0) {
        const std::string op = args.machine_id + ":" + std::to_string(index) + ":" + std::to_string(++seq);
        critical_section(db, name, fence, op, rng);
      }
      client.unlock(name);  // never throws for database trouble
    }
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
    options.machine_id = args.machine_id;
    options.watchdog_timeout = std::chrono::milliseconds(kWatchdogMs);
    options.poll_interval = std::chrono::milliseconds(kPollMs);
    options.io_timeout = std::chrono::milliseconds(2000);
    options.connect_timeout = std::chrono::milliseconds(2000);
    options.pool_size = static_cast<std::size_t>(args.pool_size);
    std::unique_ptr<DatabaseDistributedLock> client;
    while (!client) {  // the server may be down or paused at start-up
      try {
        client = std::make_unique<DatabaseDistributedLock>(options);
      } catch (const BackendError&) {
        if (now_us() >= args.until_us) return 0;
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
      }
    }
    Worker worker{args, History(args.history_path), *client,
                  details::ConnectionSettings::from(options)};
    std::vector<std::thread> threads;
    for (int t = 0; t < args.threads; ++t) threads.emplace_back([&worker, t] { worker.run_thread(t); });
    for (auto& t : threads) t.join();
  }
  // The client is gone: every thread it started must be gone too.
  std::cout << "threads left " << settled_thread_count(baseline) - baseline << std::endl;
  return 0;
}

}  // namespace dlock::torture
