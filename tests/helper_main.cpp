// dlock_test_helper: the other process in multi-process tests.
//
//   dlock_test_helper URL hold NAME LEASE_MS
//       Acquire NAME (LEASE_MS 0: watchdog mode), print "acquired FENCE",
//       then sleep until killed.
//   dlock_test_helper URL hold-for NAME MS
//       Acquire NAME (watchdog mode), print "acquired FENCE", hold it MS
//       milliseconds, unlock, print "released", exit.
//   dlock_test_helper URL rmw NAME COUNTER_TABLE ROUNDS
//       ROUNDS times: lock NAME, read the counter row, write it + 1 (a
//       non-atomic read-modify-write), unlock. Prints "done" at the end.
//   dlock_test_helper exec-ignoring-sigchld PROGRAM ARGS...
//       Execs PROGRAM with SIGCHLD ignored (inherited across exec).
//   dlock_test_helper URL hold-permit NAME PERMITS
//       Acquire a permit of semaphore NAME with bound PERMITS (watchdog
//       mode), print "acquired", then sleep until killed.
//   dlock_test_helper URL permit-for NAME PERMITS MS
//       Acquire a permit (watchdog mode), print "acquired", hold it MS
//       milliseconds, release it, print "released", exit.
//   dlock_test_helper URL hold-read NAME   /   hold-write NAME
//       Acquire the read / write side of read-write lock NAME (watchdog
//       mode), print "acquired FENCE", then sleep until killed.
//   dlock_test_helper URL read-for NAME MS   /   write-for NAME MS
//       Acquire that side, print "acquired FENCE", hold it MS milliseconds,
//       release it, print "released", exit.
//   dlock_test_helper URL read-many PREFIX COUNT
//       Read-locks COUNT read-write locks PREFIX0, PREFIX1, ... at once
//       (watchdog mode), prints "acquired", then sleeps until killed.
//   dlock_test_helper URL multi-rmw PREFIX COUNT ROUNDS fwd|rev COUNTER_TABLE
//       ROUNDS times: take PREFIX0 .. PREFIX<COUNT-1> together with one
//       MultiLock (listed in that order, or reversed), check in the lock
//       table that all COUNT rows are held by this process, do a non-atomic
//       read-modify-write of the counter row, unlock. Prints "done", or
//       "timeout ROUND" / "partial ROUND HELD" and exits 1.
//   dlock_test_helper URL wait NAME WAIT_MS
//       try_lock(NAME, WAIT_MS); prints "waiting" once it has been refused
//       (so a release from then on is one it must be woken by), then
//       "acquired FENCE MS" or "timeout MS" (milliseconds waited), releases
//       and exits.
//   dlock_test_helper URL wait-fair NAME WAIT_MS
//       The same with fair lock NAME.
//   dlock_test_helper URL campaign NAME VALUE
//       campaigns with VALUE; prints "leader TERM", then holds until killed.
//   dlock_test_helper URL campaign-for NAME VALUE MS
//       campaigns; prints "leader TERM AT_NS" (AT_NS: CLOCK_MONOTONIC when it
//       became leader), leads MS milliseconds, resigns, prints "resigned
//       AT_NS" (right after resign() returned) and exits.
//   dlock_test_helper URL observe NAME COUNT
//       observes from revision 0; prints "view REVISION TERM VALUE" (or
//       "view REVISION none") for COUNT changes, then "done".
#include <dlock/dlock.hpp>

#include <cppconn/prepared_statement.h>
#include <cppconn/resultset.h>

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "sql/connection.hpp"

int main(int argc, char** argv) {
  if (argc >= 3 && std::string(argv[1]) == "exec-ignoring-sigchld") {
    // dlock_test_helper exec-ignoring-sigchld PROGRAM ARGS...: runs PROGRAM
    // with SIGCHLD ignored, as some supervisors and shells leave it.
    ::signal(SIGCHLD, SIG_IGN);
    ::execv(argv[2], argv + 2);
    return 127;
  }
  if (argc < 4) {
    std::cerr << "usage: dlock_test_helper URL COMMAND ARGS...\n";
    return 2;
  }
  const std::string url = argv[1];
  const std::string command = argv[2];
  const std::string name = argv[3];
  try {
    dlock::DatabaseDistributedLock client(dlock::Options::from_url(url));
    if (command == "hold" && argc == 5) {
      const long lease = std::stol(argv[4]);
      if (lease > 0) {
        client.lock(name, dlock::Millis(lease));
      } else {
        client.lock(name);
      }
      std::cout << "acquired " << client.fencing_token(name) << std::endl;
      for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
    }
    if (command == "hold-permit" && argc == 5) {
      dlock::Permit permit = client.get_semaphore(name, static_cast<std::uint32_t>(std::stoul(argv[4]))).acquire();
      std::cout << "acquired" << std::endl;
      for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
    }
    if (command == "permit-for" && argc == 6) {
      dlock::Permit permit = client.get_semaphore(name, static_cast<std::uint32_t>(std::stoul(argv[4]))).acquire();
      std::cout << "acquired" << std::endl;
      std::this_thread::sleep_for(std::chrono::milliseconds(std::stol(argv[5])));
      permit.release();
      std::cout << "released" << std::endl;
      return 0;
    }
    if ((command == "hold-read" || command == "hold-write") && argc == 4) {
      dlock::ReadWriteLock rw = client.get_read_write_lock(name);
      dlock::Lock side = command == "hold-read" ? rw.read_lock() : rw.write_lock();
      side.lock();
      std::cout << "acquired " << side.fencing_token() << std::endl;
      for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
    }
    if (command == "read-many" && argc == 5) {
      const int count = std::stoi(argv[4]);
      for (int i = 0; i < count; ++i) client.get_read_write_lock(name + std::to_string(i)).lock_shared();
      std::cout << "acquired" << std::endl;
      for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
    }
    if ((command == "read-for" || command == "write-for") && argc == 5) {
      dlock::ReadWriteLock rw = client.get_read_write_lock(name);
      dlock::Lock side = command == "read-for" ? rw.read_lock() : rw.write_lock();
      side.lock();
      std::cout << "acquired " << side.fencing_token() << std::endl;
      std::this_thread::sleep_for(std::chrono::milliseconds(std::stol(argv[4])));
      side.unlock();
      std::cout << "released" << std::endl;
      return 0;
    }
    if (command == "hold-for" && argc == 5) {
      client.lock(name);
      std::cout << "acquired " << client.fencing_token(name) << std::endl;
      std::this_thread::sleep_for(std::chrono::milliseconds(std::stol(argv[4])));
      client.unlock(name);
      std::cout << "released" << std::endl;
      return 0;
    }
    const auto monotonic_ns = [] {
      return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count();
    };
    if (command == "campaign" && argc == 5) {
      dlock::Election election = client.get_election(name);
      std::cout << "leader " << election.campaign(argv[4]) << std::endl;
      for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
    }
    if (command == "campaign-for" && argc == 6) {
      dlock::Election election = client.get_election(name);
      const std::uint64_t term = election.campaign(argv[4]);
      std::cout << "leader " << term << " " << monotonic_ns() << std::endl;
      std::this_thread::sleep_for(std::chrono::milliseconds(std::stol(argv[5])));
      election.resign();
      std::cout << "resigned " << monotonic_ns() << std::endl;
      return 0;
    }
    if (command == "observe" && argc == 5) {
      dlock::Election election = client.get_election(name);
      std::uint64_t seen = 0;
      for (int i = 0, n = std::stoi(argv[4]); i < n;) {
        const auto view = election.observe(seen, std::chrono::seconds(60));
        if (!view) continue;
        seen = view->revision;
        ++i;
        if (view->leader) {
          std::cout << "view " << view->revision << " " << view->leader->term << " " << view->leader->value << std::endl;
        } else {
          std::cout << "view " << view->revision << " none" << std::endl;
        }
      }
      std::cout << "done" << std::endl;
      return 0;
    }
    if (command == "rmw" && argc == 6) {
      const std::string counter = argv[4];
      const int rounds = std::stoi(argv[5]);
      auto c = dlock::details::Connection::open(dlock::details::ConnectionSettings::from(dlock::Options::from_url(url)));
      auto& read = c->prepared("SELECT value FROM `" + counter + "` WHERE id = 1");
      auto& write = c->prepared("UPDATE `" + counter + "` SET value = ? WHERE id = 1");
      dlock::Lock lock = client.get_lock(name);
      for (int i = 0; i < rounds; ++i) {
        std::lock_guard<dlock::Lock> guard(lock);
        std::unique_ptr<sql::ResultSet> rs(read.executeQuery());
        rs->next();
        const auto value = rs->getInt64(1);
        rs.reset();
        std::this_thread::sleep_for(std::chrono::microseconds(300));
        write.setInt64(1, value + 1);
        write.executeUpdate();
      }
      std::cout << "done" << std::endl;
      return 0;
    }
    if (command == "multi-rmw" && argc == 8) {
      const std::string prefix = name;
      const int count = std::stoi(argv[4]);
      const int rounds = std::stoi(argv[5]);
      const bool reversed = std::string(argv[6]) == "rev";
      const std::string counter = argv[7];
      std::vector<std::string> names;
      for (int i = 0; i < count; ++i) names.push_back(prefix + std::to_string(i));
      if (reversed) std::reverse(names.begin(), names.end());
      const dlock::Options options = dlock::Options::from_url(url);
      auto c = dlock::details::Connection::open(dlock::details::ConnectionSettings::from(options));
      auto& read = c->prepared("SELECT value FROM `" + counter + "` WHERE id = 1");
      auto& write = c->prepared("UPDATE `" + counter + "` SET value = ? WHERE id = 1");
      auto& held = c->prepared("SELECT COUNT(*) FROM `" + options.table +
                               "` WHERE kind = 1 AND slot = 0 AND lock_name LIKE CONCAT(?, '%') AND state > 0 AND"
                               " expire_time > NOW(6) AND holder_pid = ?");
      held.setString(1, prefix);
      held.setUInt64(2, static_cast<std::uint64_t>(::getpid()));
      dlock::MultiLock set = client.get_multi_lock(names);
      for (int i = 0; i < rounds; ++i) {
        if (!set.try_lock_for(std::chrono::seconds(30))) {
          std::cout << "timeout " << i << std::endl;
          return 1;
        }
        std::unique_ptr<sql::ResultSet> h(held.executeQuery());
        h->next();
        if (h->getInt(1) != count) {
          std::cout << "partial " << i << " " << h->getInt(1) << std::endl;
          return 1;
        }
        h.reset();
        std::unique_ptr<sql::ResultSet> rs(read.executeQuery());
        rs->next();
        const auto value = rs->getInt64(1);
        rs.reset();
        write.setInt64(1, value + 1);
        write.executeUpdate();
        set.unlock();
      }
      std::cout << "done" << std::endl;
      return 0;
    }
    if (command == "fair-wait" && argc == 5) {
      // Joins the fair lock's queue and says so; holds what it is granted
      // until stdin closes (or forever), then unlocks.
      dlock::Lock fair = client.get_fair_lock(name);
      std::cout << "waiting" << std::endl;
      if (!fair.try_lock_for(dlock::Millis(std::stol(argv[4])))) {
        std::cout << "timeout" << std::endl;
        return 0;
      }
      std::cout << "acquired " << fair.fencing_token() << std::endl;
      std::string line;
      std::getline(std::cin, line);
      fair.unlock();
      std::cout << "released" << std::endl;
      return 0;
    }
    if ((command == "wait" || command == "wait-fair") && argc == 5) {
      const bool fair = command == "wait-fair";
      dlock::Lock lock = fair ? client.get_fair_lock(name) : client.get_lock(name);
      const auto start = std::chrono::steady_clock::now();
      std::atomic<bool> ended{false};
      std::thread announce([&] {
        while (!ended) {
          if (client.metrics().of(fair ? dlock::MetricKind::kFairLock : dlock::MetricKind::kLock).waiting >= 1) {
            std::cout << "waiting" << std::endl;
            return;
          }
          std::this_thread::sleep_for(std::chrono::milliseconds(5));
        }
      });
      const bool ok = lock.try_lock_for(dlock::Millis(std::stol(argv[4])));
      ended = true;
      announce.join();
      const auto waited =
          std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count();
      if (ok) {
        std::cout << "acquired " << lock.fencing_token() << " " << waited << std::endl;
        lock.unlock();
      } else {
        std::cout << "timeout " << waited << std::endl;
      }
      return 0;
    }
    std::cerr << "dlock_test_helper: bad command line\n";
    return 2;
  } catch (const std::exception& e) {
    std::cout << "error " << e.what() << std::endl;
    return 1;
  }
}
