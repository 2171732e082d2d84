// dlock_bench: dlock next to the physical floor, the seed design and
// GET_LOCK, measured side by side in one run against the private server.
//
//   dlock_bench --url URL [--quick] [--out DIR] [--only SCENARIO,...]
//               [--cluster-url URL]
//
// The cluster scenario runs only when named in --only, with --cluster-url
// a node of a Galera cluster (scripts/bench.sh --cluster sets both up).
//
// Statement counts come from the server (deltas of SHOW GLOBAL STATUS
// 'Questions' on an otherwise idle server), so they are exact and repeatable;
// timings alternate between contenders in blocks so drift hits all alike.
// Exit status: 1 if a statement-count goal is missed (timing goals are
// reported, never fatal: they are noisy on shared machines).
//
// Child modes (the benchmark runs itself as a second process):
//   dlock_bench --child-waiter URL CONTENDER NAME
//   dlock_bench --child-throughput URL CONTENDER THREADS MILLISECONDS PREFIX
#include <dlock/asio.hpp>
#include <dlock/connector.hpp>
#include <dlock/dlock.hpp>
#include <arpa/inet.h>
#include <malloc.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#ifdef DLOCK_BENCH_PROMETHEUS
#include <dlock/prometheus.hpp>
#endif

#include <boost/asio/use_future.hpp>

#include <cppconn/resultset.h>
#include <cppconn/prepared_statement.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <iostream>
#include <map>
#include <random>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "child_process.hpp"
#include "thread_count.hpp"
#include "api/tools.hpp"
#include "contenders.hpp"
#include "herd.hpp"

// Section 9 takes a MultiLock of 64 names: up to 64 of the client's internal
// mutexes held at once, past what ThreadSanitizer's deadlock detector can
// track (see tests/multi_lock_test.cpp).
extern "C" const char* __tsan_default_options() { return "detect_deadlocks=0"; }

namespace dlock::bench {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

// How long a holder keeps the lock before releasing in a handoff sample: at
// least 20 ms so the waiter is parked, plus a random part spread over one
// poll interval, so releases land at every phase of the waiter's poll (a
// fixed hold would lock onto the poll's phase and always wait ~1 s).
std::chrono::microseconds park_time(bool spread_over_poll, std::chrono::microseconds poll = 1s) {
  thread_local std::minstd_rand random(std::random_device{}());
  return 20ms + (spread_over_poll ? std::chrono::microseconds(random() % static_cast<unsigned>(poll.count())) : 0us);
}

std::string self_path;

double ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

// GET /metrics from 127.0.0.1:`port`: how many bytes came back (0: failed).
[[maybe_unused]] std::size_t scrape_bytes(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::size_t got = 0;
  const std::string request = "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      ::send(fd, request.data(), request.size(), 0) == static_cast<ssize_t>(request.size())) {
    char buffer[16384];
    for (ssize_t n; (n = ::recv(fd, buffer, sizeof buffer, 0)) > 0;) got += static_cast<std::size_t>(n);
  }
  ::close(fd);
  return got;
}

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}

struct Summary {
  double median = 0;
  double p99 = 0;
  std::size_t n = 0;
};

Summary summarize(std::vector<double> v) {
  Summary s;
  s.n = v.size();
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  s.median = v[v.size() / 2];
  s.p99 = v[std::min(v.size() - 1, static_cast<std::size_t>(static_cast<double>(v.size()) * 0.99))];
  return s;
}

// The server's own statement counter, on a connection of its own.
class ServerStats {
 public:
  explicit ServerStats(const std::string& url)
      : c_(details::Connection::open(details::ConnectionSettings::from(Options::from_url(url)))) {}
  // Statements executed since the last call, not counting the reading itself.
  std::int64_t statements_since_last() {
    const std::int64_t now = questions();
    const std::int64_t delta = now - last_ - 1;
    last_ = now;
    return delta;
  }
  void reset() { last_ = questions(); }
  std::string scalar(const std::string& sql) {
    std::unique_ptr<sql::ResultSet> rs(c_->prepared(sql).executeQuery());
    rs->next();
    return rs->getString(rs->getMetaData()->getColumnCount());
  }

 private:
  std::int64_t questions() { return std::stoll(scalar("SHOW GLOBAL STATUS LIKE 'Questions'")); }
  std::unique_ptr<details::Connection> c_;
  std::int64_t last_ = 0;
};

std::string url_with(const std::string& url, const std::string& params) {
  return url + (url.find('?') == std::string::npos ? "?" : "&") + params;
}

// Bytes allocated by malloc in every arena.
std::size_t heap_bytes() {
  const struct mallinfo2 m = mallinfo2();
  return m.uordblks + m.hblkhd;
}

std::size_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  std::size_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
}

// ------------------------------------------------------------------ report

struct Goal {
  std::string what;
  std::string measured;
  bool met;
  bool exact;  // a statement count: fails the run when missed
};

class Report {
 public:
  void section(const std::string& title, const std::string& note = "") {
    md_ << "\n### " << title << "\n\n";
    if (!note.empty()) md_ << note << "\n\n";
  }
  void table(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows) {
    md_ << "|";
    for (const auto& h : header) md_ << " " << h << " |";
    md_ << "\n|";
    for (std::size_t i = 0; i < header.size(); ++i) md_ << "---|";
    md_ << "\n";
    for (const auto& r : rows) {
      md_ << "|";
      for (const auto& c : r) md_ << " " << c << " |";
      md_ << "\n";
    }
    std::cout << md_.str().substr(printed_) << std::flush;
    printed_ = md_.str().size();
  }
  void json(const std::string& key, const std::string& value) { json_.emplace_back(key, value); }
  void goal(Goal g) { goals_.push_back(std::move(g)); }
  const std::vector<Goal>& goals() const { return goals_; }
  std::string markdown() const { return md_.str(); }
  std::string json_text() const {
    std::string out = "{\n";
    for (std::size_t i = 0; i < json_.size(); ++i)
      out += "  \"" + json_[i].first + "\": " + json_[i].second + (i + 1 < json_.size() ? ",\n" : "\n");
    return out + "}\n";
  }

 private:
  std::ostringstream md_;
  std::size_t printed_ = 0;
  std::vector<std::pair<std::string, std::string>> json_;
  std::vector<Goal> goals_;
};

std::string num(double v, int digits = 3) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

// Lock+unlock cycles of fair lock `name` until `stop` (the hot fair lock,
// in this process and in its child).
long loop_fair(DatabaseDistributedLock& client, const std::string& name, const std::atomic<bool>& stop) {
  Lock fair = client.get_fair_lock(name);
  long cycles = 0;
  while (!stop) {
    fair.lock();
    fair.unlock();
    ++cycles;
  }
  return cycles;
}

// ------------------------------------------------------------------ scenarios

// Every table of the benchmark's (named bench...) is made afresh by each run:
// one left by an earlier dlock version would be refused.
void drop_bench_tables(const std::string& url) {
  auto c = details::Connection::open(details::ConnectionSettings::from(Options::from_url(url)));
  std::vector<std::pair<std::string, std::string>> found;
  {
    std::unique_ptr<sql::ResultSet> rs(
        c->prepared("SELECT TABLE_NAME, TABLE_TYPE FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE()"
                    " AND TABLE_NAME LIKE 'bench%'")
            .executeQuery());
    while (rs->next()) found.emplace_back(rs->getString(1), rs->getString(2));
  }
  for (const auto& [table, type] : found)
    c->execute_plain(std::string(type == "VIEW" ? "DROP VIEW `" : "DROP TABLE `") + table + "`");
}

struct Bench {
  std::string url;
  bool quick = false;
  ServerStats stats;
  Report report;
  std::map<std::string, std::unique_ptr<Contender>> contenders;

  explicit Bench(const std::string& u, bool q) : url(u), quick(q), stats(u) {
    drop_bench_tables(u);
    for (const auto& n : contender_names()) contenders[n] = make_contender(n, url);
    for (const auto& n : rw_contender_names()) contenders[n] = make_contender(n, url);
    // Scenarios 1 and 1b only; after the dlock contenders, whose client
    // makes its table.
    contenders["floor-one-table"] = make_contender("floor-one-table", url);
  }

  // Server-counted statements per uncontended lock+unlock of `name`, after a
  // warm-up (statements prepared, row created). Two runs, the smaller count:
  // a watchdog tick that happens to land in one run is background work, not
  // part of the cycle.
  double statements_per_cycle(Session& session, const std::string& name, int cycles) {
    return statements_per_cycle(session, name, cycles, stats);
  }
  // The same, counted by `counter`'s server, the fewest of `runs` runs.
  static double statements_per_cycle(Session& session, const std::string& name, int cycles, ServerStats& counter,
                                     int runs = 2) {
    for (int i = 0; i < 20; ++i) {
      session.lock(name);
      session.unlock(name);
    }
    std::int64_t best = -1;
    for (int run = 0; run < runs; ++run) {
      counter.reset();
      for (int i = 0; i < cycles; ++i) {
        session.lock(name);
        session.unlock(name);
      }
      const auto counted = counter.statements_since_last();
      if (best < 0 || counted < best) best = counted;
    }
    return static_cast<double>(best) / cycles;
  }

  // 1. Uncontended lock+unlock: statements (server-counted) and latency.
  void uncontended() {
    const int cycles = quick ? 100 : 400;
    const int rounds = quick ? 3 : 8;
    std::map<std::string, std::unique_ptr<Session>> sessions;
    std::map<std::string, double> statements;
    std::map<std::string, std::vector<double>> samples;
    for (auto& [name, c] : contenders) {
      c->prepare({"uncontended"});
      sessions[name] = c->session();
      statements[name] = statements_per_cycle(*sessions[name], "uncontended", cycles);
    }
    // Round-robin, one cycle per contender at a time: the disk's fsync
    // latency drifts on shared machines, and this way every contender sees
    // the same drift.
    // Each round runs them in a new order (shuffled, fixed seed), so that
    // none always follows the same neighbour's commit (the server's
    // background work after a commit, such as purging its undo, falls on
    // whoever comes next; rotating the start alone kept every neighbour).
    auto order = contender_names();
    for (const auto& n : rw_contender_names()) order.push_back(n);
    order.push_back("floor-one-table");
    auto round_order = order;
    std::mt19937 shuffle_rng(20261125);
    for (int i = 0; i < rounds * cycles / 2; ++i) {
      std::shuffle(round_order.begin(), round_order.end(), shuffle_rng);
      for (const auto& name : round_order) {
        auto& s = sessions[name];
        const auto t0 = Clock::now();
        s->lock("uncontended");
        s->unlock("uncontended");
        samples[name].push_back(ms(Clock::now() - t0));
      }
    }
    report.section("1. Uncontended lock + unlock",
                   "Statements per cycle counted by the server; latency per cycle, contenders interleaved cycle by "
                   "cycle. dlock-no-wakeup is dlock with fast_wakeup off: the difference from dlock-watchdog is "
                   "what the session bells cost when nobody waits. floor-one-table runs the floor's two statements "
                   "on dlock's table (its key and row): between the floor and dlock, what the table costs.");
    std::vector<std::vector<std::string>> rows;
    const double floor_median = summarize(samples["floor"]).median;
    std::string json = "{";
    for (const auto& name : order) {
      const auto s = summarize(samples[name]);
      rows.push_back({name, num(statements[name], 2), num(s.median), num(s.p99), num(s.median / floor_median, 2)});
      json += "\"" + name + "\": {\"statements\": " + num(statements[name], 2) + ", \"median_ms\": " + num(s.median) +
              ", \"p99_ms\": " + num(s.p99) + "}, ";
    }
    report.table({"contender", "statements / cycle", "median ms", "p99 ms", "median vs floor"}, rows);
    report.json("uncontended", json.substr(0, json.size() - 2) + "}");
    for (const char* d : {"dlock-watchdog", "dlock-lease"}) {
      report.goal({std::string("uncontended cycle, ") + d + ": exactly 2 statements (floor: " +
                       num(statements["floor"], 0) + ")",
                   num(statements[d], 2), statements[d] == 2.0, true});
      const double ratio = summarize(samples[d]).median / floor_median;
      report.goal({std::string("uncontended latency, ") + d + ": <= 1.05 x floor", num(ratio, 2) + " x",
                   ratio <= 1.05, false});
    }
    report.goal({"seed design: 3 or more statements per cycle", num(statements["seed"], 2),
                 statements["seed"] >= 3.0, true});
    const double async_ratio = summarize(samples["dlock-async"]).median / summarize(samples["dlock-watchdog"]).median;
    report.goal({"uncontended cycle, dlock-async: exactly 2 statements", num(statements["dlock-async"], 2),
                 statements["dlock-async"] == 2.0, true});
    report.goal({"uncontended latency, dlock-async: <= 1.15 x dlock-watchdog (synchronous)", num(async_ratio, 2) + " x",
                 async_ratio <= 1.15, false});
    report.goal({"uncontended cycle, dlock-semaphore (acquire + release of a permit): exactly 2 statements",
                 num(statements["dlock-semaphore"], 2), statements["dlock-semaphore"] == 2.0, true});
    report.goal({"uncontended cycle, dlock-read (read lock + unlock): exactly 2 statements",
                 num(statements["dlock-read"], 2), statements["dlock-read"] == 2.0, true});
    report.goal({"uncontended cycle, dlock-write (write lock + unlock, no reader): exactly 2 statements",
                 num(statements["dlock-write"], 2), statements["dlock-write"] == 2.0, true});
    // Every kind on the one engine: a permit and the write side cost what
    // the lock's floor does, the read side (two rows per statement) a little more.
    for (const auto& [name, bound] : {std::pair<const char*, double>{"dlock-semaphore", 1.05},
                                      {"dlock-write", 1.05}, {"dlock-read", 1.2}}) {
      const double ratio = summarize(samples[name]).median / floor_median;
      report.goal({std::string("uncontended latency, ") + name + ": <= " + num(bound, 2) + " x floor",
                   num(ratio, 2) + " x", ratio <= bound, false});
    }
    report.goal({"uncontended cycle, dlock-fair (fair lock + unlock): exactly 2 statements",
                 num(statements["dlock-fair"], 2), statements["dlock-fair"] == 2.0, true});
    const double fair_ratio = summarize(samples["dlock-fair"]).median / summarize(samples["dlock-watchdog"]).median;
    report.goal({"uncontended latency, dlock-fair: <= 1.05 x dlock-watchdog (the plain lock)", num(fair_ratio, 2) + " x",
                 fair_ratio <= 1.05, false});
    const double bell_cost = summarize(samples["dlock-watchdog"]).median / summarize(samples["dlock-no-wakeup"]).median;
    report.goal({"session bells' cost, uncontended: dlock-watchdog <= 1.03 x dlock-no-wakeup",
                 num(bell_cost, 2) + " x", bell_cost <= 1.03, false});
  }

  // 2. Reentrant acquire and release.
  void reentrant() {
    const int reps = quick ? 50 : 200;
    report.section("2. Reentrant acquire and release (nesting level 2)",
                   "Statements and latency of the inner acquire and the inner release while the outer hold is kept.");
    std::vector<std::vector<std::string>> rows;
    std::string json = "{";
    for (const char* name : {"dlock-watchdog", "dlock-lease", "seed"}) {
      auto s = contenders[name]->session();
      std::vector<double> acquire_statements, release_statements;  // per rep; the median is reported
      std::vector<double> acquire_ms, release_ms;
      s->lock("reentrant");
      for (int i = 0; i < reps; ++i) {
        stats.reset();
        auto t0 = Clock::now();
        s->lock("reentrant");
        acquire_ms.push_back(ms(Clock::now() - t0));
        acquire_statements.push_back(static_cast<double>(stats.statements_since_last()));
        t0 = Clock::now();
        s->unlock("reentrant");
        release_ms.push_back(ms(Clock::now() - t0));
        release_statements.push_back(static_cast<double>(stats.statements_since_last()));
      }
      s->unlock("reentrant");
      const double a = summarize(acquire_statements).median;
      const double r = summarize(release_statements).median;
      rows.push_back({name, num(a, 2), num(summarize(acquire_ms).median), num(r, 2), num(summarize(release_ms).median)});
      json += std::string("\"") + name + "\": {\"acquire_statements\": " + num(a, 2) +
              ", \"release_statements\": " + num(r, 2) + "}, ";
      if (std::string(name).rfind("dlock", 0) == 0) {
        report.goal({std::string("reentrant acquire, ") + name + ": 1 statement", num(a, 2), a == 1.0, true});
        report.goal({std::string("reentrant release, ") + name + ": 1 statement", num(r, 2), r == 1.0, true});
      }
    }
    report.table({"contender", "acquire statements", "acquire median ms", "release statements", "release median ms"},
                 rows);
    report.json("reentrant", json.substr(0, json.size() - 2) + "}");
  }

  // 3. Throughput on distinct names.
  double throughput_run(Contender& c, int threads, std::chrono::milliseconds duration, const std::string& prefix) {
    std::vector<std::string> names;
    for (int t = 0; t < threads; ++t) names.push_back(prefix + std::to_string(t));
    c.prepare(names);
    std::vector<std::unique_ptr<Session>> sessions;
    for (int t = 0; t < threads; ++t) sessions.push_back(c.session());
    std::atomic<bool> go{false}, stop{false};
    std::atomic<long> ops{0};
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] {
        while (!go) std::this_thread::yield();
        long mine = 0;
        while (!stop) {
          sessions[t]->lock(names[t]);
          sessions[t]->unlock(names[t]);
          ++mine;
        }
        ops += mine;
      });
    }
    go = true;
    std::this_thread::sleep_for(duration);
    stop = true;
    for (auto& th : pool) th.join();
    return static_cast<double>(ops.load()) / std::chrono::duration<double>(duration).count();
  }

  double throughput_processes(const std::string& contender, int processes, int threads,
                              std::chrono::milliseconds duration) {
    std::vector<std::unique_ptr<test::ChildProcess>> children;
    for (int p = 0; p < processes; ++p) {
      children.push_back(std::make_unique<test::ChildProcess>(
          self_path, std::vector<std::string>{"--child-throughput", url, contender, std::to_string(threads),
                                              std::to_string(duration.count()), "proc" + std::to_string(p) + "-"}));
    }
    double total = 0;
    for (auto& c : children) {
      auto line = c->wait_for_line("ops ", duration + 60s);
      if (line) total += std::stod(line->substr(4));
      c->wait(10s);
    }
    return total;
  }

  // Cycles per second of each of `processes` processes, one thread each,
  // all looping lock+unlock on one name.
  std::vector<double> one_name_processes(const std::string& contender, int processes,
                                         std::chrono::milliseconds duration) {
    const std::string prefix = "xp-" + contender + "-" + std::to_string(now_ns()) + "-";
    contenders[contender]->prepare({prefix + "0"});
    std::vector<std::unique_ptr<test::ChildProcess>> children;
    for (int p = 0; p < processes; ++p) {
      children.push_back(std::make_unique<test::ChildProcess>(
          self_path, std::vector<std::string>{"--child-throughput", url, contender, "1",
                                              std::to_string(duration.count()), prefix}));
    }
    std::vector<double> each;
    for (auto& c : children) {
      auto line = c->wait_for_line("ops ", duration + 60s);
      each.push_back(line ? std::stod(line->substr(4)) : 0.0);
      c->wait(10s);
    }
    return each;
  }

  // 3b. One name, contended across processes: every release has a waiter
  // elsewhere, so every cycle pays what the wake-up costs (the waiter's
  // mark, the ringing release) on top of the two commits.
  void throughput_one_name() {
    const auto duration = quick ? 500ms : 2000ms;
    const int rounds = quick ? 1 : 5;
    report.section("3b. One name, two processes (lock+unlock cycles per second)",
                   "Two processes, one thread each, loop lock+unlock on one name for " +
                       std::to_string(duration.count()) +
                       " ms; median round of the total, and the slower process's share of it in that round.");
    std::vector<std::pair<double, double>> totals;  // total, slower share
    for (int r = 0; r < rounds; ++r) {
      const auto each = one_name_processes("dlock-watchdog", 2, duration);
      const double total = each[0] + each[1];
      totals.emplace_back(total, total > 0 ? std::min(each[0], each[1]) / total : 0.0);
    }
    std::sort(totals.begin(), totals.end());
    const auto [total, share] = totals[totals.size() / 2];
    report.table({"contender", "cycles / s (both processes)", "slower process's share"},
                 {{"dlock-watchdog", num(total, 0), num(share, 2)}});
    report.json("one_name_two_processes",
                "{\"dlock-watchdog\": {\"cycles_per_s\": " + num(total, 1) + ", \"slower_share\": " + num(share, 2) + "}}");
  }

  void throughput() {
    const auto duration = quick ? 400ms : 1000ms;
    const int rounds = quick ? 1 : 7;
    report.section("3. Throughput on distinct names (lock+unlock cycles per second)",
                   "Each thread has its own name. Short rounds alternate between contenders, in a new order each "
                   "round, and the median round is shown: on a small machine the disk's group commit makes single "
                   "rounds swing by tens of percent.");
    std::map<std::string, std::map<int, std::vector<double>>> rounds_of;
    const std::vector<int> thread_counts = {1, 4, 16};
    auto names = contender_names();
    auto order = names;
    std::mt19937 shuffle_rng(20261125);  // a new order each round, as in scenario 1
    for (int r = 0; r < rounds; ++r) {
      for (int threads : thread_counts) {
        std::shuffle(order.begin(), order.end(), shuffle_rng);
        for (const auto& name : order) {
          rounds_of[name][threads].push_back(
              throughput_run(*contenders[name], threads, duration, "tp" + std::to_string(threads) + "-"));
        }
      }
      // Whole processes are slow to start, so fewer rounds than the threads
      // get; but not two: the median of two is their mean, and one slow
      // round moved the 2 x 8 cell by 4 %.
      if (r < 5 || quick) {
        std::shuffle(order.begin(), order.end(), shuffle_rng);
        for (const auto& name : order) rounds_of[name][-2].push_back(throughput_processes(name, 2, 8, duration));
      }
    }
    std::map<std::string, std::map<int, double>> result;
    for (auto& [name, by_threads] : rounds_of)
      for (auto& [threads, values] : by_threads) result[name][threads] = summarize(values).median;
    std::vector<std::vector<std::string>> rows;
    std::string json = "{";
    std::ofstream dat(out_dir + "/throughput.dat");
    dat << "threads";
    for (const auto& name : contender_names()) dat << " " << name;
    dat << "\n";
    for (int threads : thread_counts) {
      dat << threads;
      for (const auto& name : contender_names()) dat << " " << num(result[name][threads], 1);
      dat << "\n";
    }
    for (const auto& name : names) {
      rows.push_back({name, num(result[name][1], 0), num(result[name][4], 0), num(result[name][16], 0),
                      num(result[name][-2], 0)});
      json += "\"" + name + "\": {\"1\": " + num(result[name][1], 1) + ", \"4\": " + num(result[name][4], 1) +
              ", \"16\": " + num(result[name][16], 1) + ", \"2x8_processes\": " + num(result[name][-2], 1) + "}, ";
    }
    report.table({"contender", "1 thread", "4 threads", "16 threads", "2 processes x 8 threads"}, rows);
    report.json("throughput", json.substr(0, json.size() - 2) + "}");
    for (const auto& [threads, label] : {std::pair{16, "16-thread"}, std::pair{-2, "2 processes x 8 threads"}}) {
      for (const char* d : {"dlock-watchdog", "dlock-lease"}) {
        const double ratio = result[d][threads] / result["floor"][threads];
        report.goal({std::string(label) + " throughput, " + d + ": >= 0.95 x floor", num(ratio, 2) + " x",
                     ratio >= 0.95, false});
      }
    }
  }

  // 4e. Handoffs measured from unlock() being called (the release's commit
  // included), beside the physical floor measured the same way.
  void handoff_from_call() {
    const int n = quick ? 20 : 150;
    report.section("4e. Handoff from unlock() being called, beside the floor",
                   "ms from the holder calling unlock() to the waiter's lock() returning (release commit, wake, take "
                   "commit). The floor: two raw conditional UPDATEs on two connections, the waiter told at once "
                   "(in-process, or through a pipe to another process). \"first contention\": every handoff on a "
                   "name no one used before.");
    Summary floor_local = floor_handoff_in_process(n);
    Summary floor_process;
    handoff_cross_process("floor", n, false, "handoff-floor-op", 1s, "", &floor_process);
    std::vector<std::vector<std::string>> rows;
    std::string json = "{";
    const auto add = [&](const std::string& who, const std::string& where, const Summary& sm, const Summary& floor) {
      rows.push_back({who, where, std::to_string(sm.n), num(sm.median), num(sm.p99), num(sm.median / floor.median, 2)});
      json += "\"" + who + " / " + where + "\": {\"median_ms\": " + num(sm.median) + ", \"p99_ms\": " + num(sm.p99) +
              ", \"vs_floor\": " + num(sm.median / floor.median, 2) + "}, ";
    };
    add("floor", "other connection", floor_local, floor_local);
    add("floor", "other process", floor_process, floor_process);
    for (const char* contender : {"dlock-watchdog", "dlock-async"}) {
      auto& c = *contenders[contender];
      auto h = c.session();
      auto w = c.session();
      Summary same, other_client, process, first;
      handoff_in_process(*h, *w, n, false, std::string("hc-same-") + contender, &same);
      add(contender, "same client", same, floor_local);
      if (std::string(contender) == "dlock-watchdog") {
        auto other = make_contender(contender, url);
        auto w2 = other->session();
        handoff_in_process(*h, *w2, n, false, "hc-other-client", &other_client);
        add(contender, "other client", other_client, floor_local);
      }
      handoff_cross_process(contender, n, false, std::string("hc-op-") + contender, 1s, "", &process);
      add(contender, "other process", process, floor_process);
      handoff_cross_process(contender, n, false, std::string("hc-first-") + contender, 1s, "", &first, true);
      add(contender, "other process, first contention", first, floor_process);
      if (std::string(contender) == "dlock-watchdog") {
        report.goal({"handoff from unlock(), other process: median <= 1.5 x floor",
                     num(process.median / floor_process.median, 2) + " x",
                     process.median <= 1.5 * floor_process.median, false});
        report.goal({"handoff from unlock(), other process, first contention: median <= 1.5 x floor",
                     num(first.median / floor_process.median, 2) + " x", first.median <= 1.5 * floor_process.median,
                     false});
      }
    }
    report.table({"contender", "waiter", "n", "median ms", "p99 ms", "median vs floor"}, rows);
    report.json("handoff_from_call", json.substr(0, json.size() - 2) + "}");
  }

  // 4f. Hot lock: one name, `threads` threads of one client, each looping
  // lock + unlock. dlock hands a release straight to a waiting thread (one
  // commit) where the floor frees the row and a woken thread takes it (two
  // commits): the floor's threads have a connection each, and a release
  // wakes one of them at once through an in-process condition variable (the
  // ideal local wake-up). A waiter in another process loops lock + unlock on
  // the same name meanwhile: the longest it waited is the bound on what
  // chains of local handoffs cost other clients.
  double hot_floor_run(int threads, std::chrono::milliseconds duration) {
    contenders["floor"]->prepare({"hot-floor"});
    std::mutex m;
    std::condition_variable cv;
    std::uint64_t frees = 0;  // under m
    std::atomic<bool> go{false}, stop{false};
    std::atomic<long> ops{0};
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] {
        auto c = details::Connection::open(details::ConnectionSettings::from(Options::from_url(url)));
        auto& take = c->prepared(
            "UPDATE bench_floor SET is_locked = 1, machine_id = 'floor', thread_id = ?, state = 1,"
            " expire_time = NOW(6) + INTERVAL 30 SECOND, fence = fence + 1"
            " WHERE lock_name = 'hot-floor' AND (is_locked = 0 OR expire_time <= NOW(6))");
        auto& free = c->prepared(
            "UPDATE bench_floor SET is_locked = 0, machine_id = NULL, thread_id = NULL, state = 0, expire_time = NULL"
            " WHERE lock_name = 'hot-floor' AND thread_id = ?");
        const auto me = static_cast<std::uint64_t>(t + 1);
        while (!go) std::this_thread::yield();
        long mine = 0;
        while (!stop) {
          std::uint64_t seen = 0;
          {
            std::lock_guard<std::mutex> g(m);
            seen = frees;
          }
          take.setUInt64(1, me);
          if (take.executeUpdate() != 1) {
            std::unique_lock<std::mutex> l(m);
            cv.wait_for(l, 5ms, [&] { return frees != seen || stop; });
            continue;
          }
          ++mine;
          free.setUInt64(1, me);
          free.executeUpdate();
          {
            std::lock_guard<std::mutex> g(m);
            ++frees;
          }
          cv.notify_one();
        }
        ops += mine;
      });
    }
    go = true;
    std::this_thread::sleep_for(duration);
    stop = true;
    cv.notify_all();
    for (auto& th : pool) th.join();
    return static_cast<double>(ops.load()) / std::chrono::duration<double>(duration).count();
  }

  struct HotRun {
    double cycles_per_s = 0;
    double handoffs_per_s = 0;
    std::vector<double> foreign_waits_ms;
  };

  HotRun hot_dlock_run(int threads, std::chrono::milliseconds duration, bool foreign, bool handoffs = true) {
    DatabaseDistributedLock client(Options::from_url(url));
    details::EngineAccess::of(client).enable_handoffs(handoffs);
    std::unique_ptr<test::ChildProcess> child;
    if (foreign) {
      child = std::make_unique<test::ChildProcess>(
          self_path, std::vector<std::string>{"--child-hot-waiter", url, "hot", std::to_string(duration.count())},
          false, true);
      if (!child->wait_for_line("ready", 60s)) throw std::runtime_error("hot-lock waiter did not start");
    }
    std::atomic<bool> go{false}, stop{false};
    std::atomic<long> ops{0};
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&] {
        while (!go) std::this_thread::yield();
        long mine = 0;
        while (!stop) {
          client.lock("hot");
          client.unlock("hot");
          ++mine;
        }
        ops += mine;
      });
    }
    const auto handed0 = details::EngineAccess::of(client).handoffs();
    go = true;
    if (child) child->write("go\n");
    std::this_thread::sleep_for(duration);
    stop = true;
    for (auto& th : pool) th.join();
    HotRun run;
    const double seconds = std::chrono::duration<double>(duration).count();
    run.cycles_per_s = static_cast<double>(ops.load()) / seconds;
    run.handoffs_per_s = static_cast<double>(details::EngineAccess::of(client).handoffs() - handed0) / seconds;
    if (child) {
      auto line = child->wait_for_line("waits", 60s);
      if (!line) throw std::runtime_error("hot-lock waiter did not report");
      std::istringstream in(line->substr(5));
      double w = 0;
      while (in >> w) run.foreign_waits_ms.push_back(w);
      child->wait(30s);
    }
    return run;
  }

  void hot_lock() {
    const int threads = 8;
    const auto duration = quick ? 500ms : 2000ms;
    const int rounds = quick ? 1 : 5;
    report.section("4f. Hot lock: one name, 8 threads of one client",
                   "lock+unlock cycles per second on one name, rounds alternating, median shown. floor: release "
                   "then take (two raw conditional UPDATEs on a connection per thread, a release waking one "
                   "thread at once in-process). dlock: a release hands the hold to a waiting thread in one "
                   "statement, for at most " + std::to_string(details::Engine::kHandoffChain.count()) +
                       " ms at a stretch, then frees the row and holds back its own takes for " +
                       std::to_string(details::Engine::kYieldAfterChain.count()) +
                       " ms. The waiter in another process (dlock-watchdog, woken by the bell) loops lock+unlock "
                       "on the name during the dlock rounds marked so.");
    std::vector<double> floor, alone, with_foreign, handoffs, release_then_take;
    std::vector<double> waits;
    for (int r = 0; r < rounds; ++r) {
      floor.push_back(hot_floor_run(threads, duration));
      const HotRun a = hot_dlock_run(threads, duration, false);
      alone.push_back(a.cycles_per_s);
      handoffs.push_back(a.handoffs_per_s / std::max(1.0, a.cycles_per_s));
      release_then_take.push_back(hot_dlock_run(threads, duration, false, false).cycles_per_s);
      const HotRun f = hot_dlock_run(threads, duration, true);
      with_foreign.push_back(f.cycles_per_s);
      waits.insert(waits.end(), f.foreign_waits_ms.begin(), f.foreign_waits_ms.end());
    }
    const double fl = summarize(floor).median, al = summarize(alone).median, wf = summarize(with_foreign).median;
    const double rt = summarize(release_then_take).median;
    const Summary w = summarize(waits);
    const double max_wait = waits.empty() ? 0 : *std::max_element(waits.begin(), waits.end());
    report.table({"contender", "cycles/s", "vs floor", "vs dlock release-then-take", "handed over"},
                 {{"floor (release, then take)", num(fl, 0), "1.00", num(fl / rt, 2), "-"},
                  {"dlock-watchdog, handoffs off (release, then take)", num(rt, 0), num(rt / fl, 2), "1.00", "0 %"},
                  {"dlock-watchdog", num(al, 0), num(al / fl, 2), num(al / rt, 2),
                   num(100 * summarize(handoffs).median, 0) + " %"},
                  {"dlock-watchdog + a waiter in another process", num(wf, 0), num(wf / fl, 2), num(wf / rt, 2), "-"}});
    report.table({"waiter in another process", "acquisitions", "median wait ms", "p99 ms", "max ms"},
                 {{"dlock-watchdog", std::to_string(w.n), num(w.median), num(w.p99), num(max_wait)}});
    report.json("hot_lock", "{\"floor\": " + num(fl, 1) + ", \"dlock_release_then_take\": " + num(rt, 1) +
                                ", \"dlock\": " + num(al, 1) + ", \"dlock_with_foreign\": " +
                                num(wf, 1) + ", \"foreign_acquisitions\": " + std::to_string(w.n) +
                                ", \"foreign_max_wait_ms\": " + num(max_wait) + "}");
    report.goal({"hot lock (8 threads, one name): >= 1.6 x dlock's release-then-take cycles/s", num(al / rt, 2) + " x",
                 al >= 1.6 * rt, false});
    report.goal({"hot lock (8 threads, one name): >= 1.6 x floor cycles/s", num(al / fl, 2) + " x", al >= 1.6 * fl,
                 false});
    report.goal({"hot lock: a waiter in another process waits <= 100 ms (max)", num(max_wait) + " ms",
                 w.n > 0 && max_wait <= 100.0, false});
  }

  // 4g. The fair lock: a release grants the first queued waiter in its own
  // commit, so a cross-process handoff costs one commit and a wake where
  // the floor (and the plain lock) costs two commits.
  double hot_fair_run(int threads_here, int threads_there, std::chrono::milliseconds duration) {
    DatabaseDistributedLock client(Options::from_url(url));
    client.get_fair_lock("hot-fair").lock();  // warm: the row and the statements
    client.get_fair_lock("hot-fair").unlock();
    test::ChildProcess child(self_path,
                             {"--child-hot-fair", url, "hot-fair", std::to_string(threads_there),
                              std::to_string(duration.count())},
                             false, true);
    if (!child.wait_for_line("ready", 60s)) throw std::runtime_error("hot fair child did not start");
    std::atomic<bool> go{false}, stop{false};
    std::atomic<long> ops{0};
    std::vector<std::thread> pool;
    for (int t = 0; t < threads_here; ++t) {
      pool.emplace_back([&] {
        while (!go) std::this_thread::yield();
        ops += loop_fair(client, "hot-fair", stop);
      });
    }
    child.write("go\n");
    go = true;
    std::this_thread::sleep_for(duration);
    stop = true;
    for (auto& th : pool) th.join();
    const auto line = child.wait_for_line("ops", 60s);
    if (!line) throw std::runtime_error("hot fair child did not report");
    child.wait(30s);
    return (static_cast<double>(ops.load()) + std::stod(line->substr(4))) / std::chrono::duration<double>(duration).count();
  }

  void fair_lock() {
    const int n = quick ? 20 : 1000;
    const auto duration = quick ? 500ms : 2000ms;
    const int rounds = quick ? 1 : 5;
    report.section("4g. Fair lock: the release grants the first waiter in its own commit",
                   "Handoff: ms from the holder calling unlock() to the waiter (another process) returning from "
                   "lock(), beside the floor measured the same way in this run (release commit, signal, take "
                   "commit on raw connections) and the plain lock. Hot fair lock: one name, 4 threads in this "
                   "process and 4 in another, lock+unlock loops, rounds alternating with the floor (8 threads "
                   "of one process, release then take), median round.");
    Summary floor_call, fair_call, lock_call;
    handoff_cross_process("floor", n, false, "fair-floor-op", 1s, "", &floor_call);
    handoff_cross_process("dlock-fair", n, false, "fair-op", 1s, "", &fair_call);
    handoff_cross_process("dlock-watchdog", quick ? n : 300, false, "fair-lock-op", 1s, "", &lock_call);
    std::vector<double> floor, fair;
    for (int r = 0; r < rounds; ++r) {
      floor.push_back(hot_floor_run(8, duration));
      fair.push_back(hot_fair_run(4, 4, duration));
    }
    const double fl = summarize(floor).median, fa = summarize(fair).median;
    report.table({"handoff from unlock() called, other process", "n", "median ms", "p99 ms", "median vs floor"},
                 {{"floor (two commits)", std::to_string(floor_call.n), num(floor_call.median), num(floor_call.p99),
                   "1.00"},
                  {"dlock-fair (granted by the release)", std::to_string(fair_call.n), num(fair_call.median),
                   num(fair_call.p99), num(fair_call.median / floor_call.median, 2)},
                  {"dlock-watchdog (plain lock)", std::to_string(lock_call.n), num(lock_call.median),
                   num(lock_call.p99), num(lock_call.median / floor_call.median, 2)}});
    report.table({"hot lock, one name", "cycles/s", "vs floor"},
                 {{"floor, 8 threads (release, then take)", num(fl, 0), "1.00"},
                  {"dlock-fair, 2 processes x 4 threads", num(fa, 0), num(fa / fl, 2)}});
    report.json("fair_lock", "{\"handoff_floor_ms\": " + num(floor_call.median) + ", \"handoff_fair_ms\": " +
                                 num(fair_call.median) + ", \"handoff_fair_p99_ms\": " + num(fair_call.p99) +
                                 ", \"hot_floor\": " + num(fl, 1) + ", \"hot_fair\": " + num(fa, 1) + "}");
    report.goal({"fair lock handoff from unlock() called, other process: median <= 0.6 x floor",
                 num(fair_call.median / floor_call.median, 2) + " x", fair_call.median <= 0.6 * floor_call.median,
                 false});
    report.goal({"fair lock handoff, other process: p99 < 5 ms", num(fair_call.p99) + " ms", fair_call.p99 < 5.0, false});
    report.goal({"hot fair lock (2 processes x 4 threads): >= 1.8 x floor cycles/s", num(fa / fl, 2) + " x",
                 fa >= 1.8 * fl, false});
  }

  // 11. Metrics: the uncontended cycle of three clients on one table, with
  // counting on (the default), off, and on with the Prometheus adapter
  // registered and scraped ten times a second (a Prometheus server scrapes
  // every 15 s by default), interleaved cycle by cycle in one run.
  void metrics_cost() {
    const int cycles = quick ? 300 : 4000;
    Options on = Options::from_url(url);
    on.table = "bench_metrics";
    Options off = on;
    off.metrics = false;
    std::map<std::string, std::unique_ptr<DatabaseDistributedLock>> clients;
    clients["metrics off"] = std::make_unique<DatabaseDistributedLock>(off);
    clients["metrics on"] = std::make_unique<DatabaseDistributedLock>(on);
#ifdef DLOCK_BENCH_PROMETHEUS
    clients["metrics on + Prometheus"] = std::make_unique<DatabaseDistributedLock>(on);
    ::prometheus::Exposer exposer("127.0.0.1:0", 1);
    auto registration = prometheus::register_metrics(exposer, *clients["metrics on + Prometheus"]);
    const int port = exposer.GetListeningPorts().front();
    std::atomic<bool> stop{false};
    std::atomic<int> scrapes{0};
    std::thread scraper([&] {
      while (!stop) {
        if (scrape_bytes(port) > 0) ++scrapes;
        std::this_thread::sleep_for(100ms);
      }
    });
#endif
    std::vector<std::string> order;
    for (const auto& [name, c] : clients) order.push_back(name);
    std::map<std::string, std::vector<double>> samples;
    for (const auto& name : order)
      for (int i = 0; i < 50; ++i) {
        clients[name]->lock("metrics-" + name);
        clients[name]->unlock("metrics-" + name);
      }
    std::mt19937 shuffle_rng(20261127);
    for (int i = 0; i < cycles; ++i) {
      std::shuffle(order.begin(), order.end(), shuffle_rng);
      for (const auto& name : order) {
        auto& c = *clients[name];
        const std::string lock_name = "metrics-" + name;
        const auto t0 = Clock::now();
        c.lock(lock_name);
        c.unlock(lock_name);
        samples[name].push_back(ms(Clock::now() - t0));
      }
    }
#ifdef DLOCK_BENCH_PROMETHEUS
    stop = true;
    scraper.join();
#endif
    report.section("11. Metrics: what counting costs the uncontended cycle",
                   "Three clients on one table, lock + unlock cycles interleaved one by one in a shuffled order: "
                   "metrics off, on (the default), and on with the Prometheus adapter registered and its exposer "
                   "scraped over HTTP ten times a second.");
    const double off_median = summarize(samples["metrics off"]).median;
    std::vector<std::vector<std::string>> rows;
    std::string json = "{";
    for (const auto& [name, v] : samples) {
      const Summary sum = summarize(v);
      rows.push_back({name, std::to_string(sum.n), num(sum.median), num(sum.p99), num(sum.median / off_median, 3)});
      json += "\"" + name + "\": {\"median_ms\": " + num(sum.median) + ", \"p99_ms\": " + num(sum.p99) + "}, ";
    }
    report.table({"client", "cycles", "median ms", "p99 ms", "median vs metrics off"}, rows);
#ifdef DLOCK_BENCH_PROMETHEUS
    json += "\"scrapes\": " + std::to_string(scrapes.load()) + ", ";
#endif
    report.json("metrics", json.substr(0, json.size() - 2) + "}");
    for (const auto& [name, v] : samples) {
      if (name == "metrics off") continue;
      const double ratio = summarize(v).median / off_median;
      report.goal({"uncontended cycle, " + name + ": <= 1.02 x metrics off", num(ratio, 3) + " x", ratio <= 1.02,
                   false});
    }
  }

  // 14. Herds: N waiting clients on one name.
  void herd() {
    report.section("14. Herds: N waiting clients (each its own client, default options) on one name",
                   "The holder lets go; each waiter takes the name once and lets it go at once. Per handoff: from "
                   "the holder's unlock() to the last waiter's lock() returning, divided by N. Statements: "
                   "server-counted while the N wait (default 1 s poll). Connections: server sessions per waiting "
                   "client. Order: every waiter had the name (the fair lock: in queue order). Fast wake-up off "
                   "with the fair lock runs up to 10 waiters: each grant is then found by a poll.");
    const std::vector<int> sizes = quick ? std::vector<int>{1, 10} : std::vector<int>{1, 10, 100};
    HerdProbes probes;
    probes.statements_since_last = [this] { return stats.statements_since_last(); };
    probes.global_status = [this](const std::string& status) {
      return std::stoll(stats.scalar("SHOW GLOBAL STATUS LIKE '" + status + "'"));
    };
    std::vector<std::vector<std::string>> rows;
    std::map<std::string, std::map<int, double>> per_handoff;  // "lock on" -> N -> ms
    std::map<std::string, std::map<int, HerdResult>> results;
    for (const bool fast : {true, false}) {
      for (const bool fair : {false, true}) {
        if (quick && !fast) continue;
        for (const int n : sizes) {
          if (fair && !fast && n > 10) continue;
          HerdCase c;
          c.fair = fair;
          c.waiters = n;
          c.fast_wakeup = fast;
          c.window_s = quick ? 2 : 5;
          const HerdResult r = run_herd(url, c, probes);
          const std::string series = std::string(fair ? "fair" : "lock") + (fast ? " on" : " off");
          per_handoff[series][n] = r.per_handoff_ms;
          results[series][n] = r;
          rows.push_back({fair ? "fair lock" : "lock", fast ? "on" : "off", std::to_string(n), num(r.per_handoff_ms, 2),
                          num(r.drain_ms, 1), num(r.statements_per_s, 1), num(r.connections_per_client, 2),
                          r.in_order ? "yes" : "NO"});
        }
      }
    }
    report.table({"kind", "fast wake-up", "waiting clients", "per handoff (ms)", "drain (ms)", "statements / s",
                  "connections / client", "order"},
                 rows);
    std::ofstream dat(out_dir + "/herd.dat");
    dat << "waiters";
    for (const auto& [series, by_n] : per_handoff) dat << " \"" << series << "\"";
    dat << "\n";
    for (const int n : sizes) {
      dat << n;
      for (const auto& [series, by_n] : per_handoff) {
        const auto it = by_n.find(n);
        dat << " " << (it == by_n.end() ? std::string("?") : num(it->second, 3));
      }
      dat << "\n";
    }
    const int most = sizes.back();
    for (const char* series : {"lock on", "fair on"}) {
      const double one = per_handoff[series][1];
      const double many = per_handoff[series][most];
      report.goal({std::string(series).substr(0, 4) + ": per handoff with " + std::to_string(most) +
                       " waiting clients <= 2 x with one (same run)",
                   num(many / one, 2) + " x (" + num(many, 2) + " / " + num(one, 2) + " ms)", many <= 2 * one, false});
      const HerdResult& r = results[series][most];
      report.goal({std::string(series).substr(0, 4) + ": every one of " + std::to_string(most) +
                       " waiters had the name" + (std::string(series) == "fair on" ? ", in queue order" : ""),
                   r.in_order ? "yes" : "no", r.in_order, false});
      if (most >= 100)
        report.goal({std::string(series).substr(0, 4) + ": <= 110 statements / s while 100 clients wait",
                     num(r.statements_per_s, 1), r.statements_per_s <= 110, false});
    }
  }

  // 13. Guarded transactions: the critical section's transaction with the
  // hold's guard last (docs/guarded-transactions.md) beside the same
  // transaction unguarded, interleaved cycle by cycle on one client.
  void guarded() {
    const int cycles = quick ? 100 : 400;
    const int rounds = quick ? 3 : 8;
    Options o = Options::from_url(url);
    o.table = "bench_guarded";
    DatabaseDistributedLock client(o);
    auto data = details::Connection::open(details::ConnectionSettings::from(o));
    sql::Connection& db = data->raw_for_session_change();
    const auto exec = [&](const std::string& sql) { std::unique_ptr<sql::Statement>(db.createStatement())->execute(sql); };
    exec("DROP TABLE IF EXISTS bench_guarded_data");
    exec("CREATE TABLE bench_guarded_data (id INT PRIMARY KEY, counter BIGINT NOT NULL) ENGINE=InnoDB");
    exec("INSERT INTO bench_guarded_data VALUES (1, 0)");
    Lock lock = client.get_lock("guarded");
    // References for what any guard must cost: one more round trip that
    // touches nothing (DO 1), and a locking read of the hold's row (a guard
    // that does not write it, which a Galera cluster would not certify).
    const std::string locking_read =  // 'guarded' in hex
        "SELECT hold_id FROM bench_guarded WHERE kind = 1 AND lock_name = X'67756172646564' AND slot = 0 FOR UPDATE";
    const auto reference = [&](int which) {
      lock.lock();
      exec("START TRANSACTION");
      exec("UPDATE bench_guarded_data SET counter = counter + 1 WHERE id = 1");
      if (which == 0) exec("DO 1");
      if (which == 1) std::unique_ptr<sql::ResultSet>(std::unique_ptr<sql::Statement>(db.createStatement())->executeQuery(locking_read));
      exec("COMMIT");
      lock.unlock();
    };
    const auto cycle = [&](bool with_guard) {
      lock.lock();
      exec("START TRANSACTION");
      exec("UPDATE bench_guarded_data SET counter = counter + 1 WHERE id = 1");
      if (with_guard) guard(db, lock);
      exec("COMMIT");
      lock.unlock();
    };
    std::map<bool, double> statements;
    for (const bool with_guard : {false, true}) {
      for (int i = 0; i < 20; ++i) cycle(with_guard);
      std::int64_t best = -1;
      for (int run = 0; run < 2; ++run) {
        stats.reset();
        for (int i = 0; i < cycles; ++i) cycle(with_guard);
        const auto counted = stats.statements_since_last();
        if (best < 0 || counted < best) best = counted;
      }
      statements[with_guard] = static_cast<double>(best) / cycles;
    }
    std::map<bool, std::vector<double>> samples;
    std::map<int, std::vector<double>> references;
    std::mt19937 order_rng(13);
    for (int i = 0; i < rounds * cycles / 2; ++i) {
      std::array<int, 4> order{0, 1, 2, 3};  // unguarded, guarded, + DO 1, + locking read
      std::shuffle(order.begin(), order.end(), order_rng);
      for (const int which : order) {
        const auto t0 = Clock::now();
        if (which < 2) {
          cycle(which == 1);
        } else {
          reference(which - 2);
        }
        const double took = ms(Clock::now() - t0);
        if (which < 2) {
          samples[which == 1].push_back(took);
        } else {
          references[which - 2].push_back(took);
        }
      }
    }
    report.section("13. Guarded transactions: lock, a transaction with one UPDATE, (guard), commit, unlock",
                   "One client and one connection of the program's own for the data, on the private server; the "
                   "guarded and the unguarded cycle and two references interleaved in a shuffled order.");
    const Summary plain = summarize(samples[false]);
    const Summary guarded_sum = summarize(samples[true]);
    report.table({"cycle", "statements / cycle", "median ms", "p99 ms", "median vs unguarded"},
                 {{"unguarded", num(statements[false], 2), num(plain.median), num(plain.p99), "1.00"},
                  {"guarded", num(statements[true], 2), num(guarded_sum.median), num(guarded_sum.p99),
                   num(guarded_sum.median / plain.median, 2)},
                  {"reference: unguarded + DO 1 (one more round trip)", num(statements[false] + 1, 2),
                   num(summarize(references[0]).median), num(summarize(references[0]).p99),
                   num(summarize(references[0]).median / plain.median, 2)},
                  {"reference: unguarded + a locking read of the hold's row", num(statements[false] + 1, 2),
                   num(summarize(references[1]).median), num(summarize(references[1]).p99),
                   num(summarize(references[1]).median / plain.median, 2)}});
    report.json("guarded", "{\"unguarded\": {\"statements\": " + num(statements[false], 2) + ", \"median_ms\": " +
                               num(plain.median) + "}, \"guarded\": {\"statements\": " + num(statements[true], 2) +
                               ", \"median_ms\": " + num(guarded_sum.median) + "}}");
    report.goal({"guarded cycle: exactly one statement more than unguarded",
                 num(statements[true] - statements[false], 2), statements[true] - statements[false] == 1.0, true});
    const double ratio = guarded_sum.median / plain.median;
    report.goal({"guarded cycle: <= 1.1 x the unguarded cycle", num(ratio, 2) + " x", ratio <= 1.1, false});
  }

  // 12. TLS: the uncontended cycle over encrypted sessions (the TLS-only
  // test server, ssl_mode verify_identity) beside plaintext (the plain
  // server), each with its floor, interleaved cycle by cycle.
  void tls(const std::string& tls_url) {
    const int cycles = quick ? 100 : 400;
    const int rounds = quick ? 3 : 8;
    drop_bench_tables(tls_url);
    ServerStats tls_stats(tls_url);
    struct Entry {
      std::string label;
      std::unique_ptr<Contender> contender;
      ServerStats* counter;
      std::unique_ptr<Session> session;
      double statements = 0;
      std::vector<double> samples;
    };
    std::vector<Entry> entries;
    entries.push_back({"floor, plaintext", make_contender("floor", url), &stats, nullptr, 0, {}});
    entries.push_back({"dlock, plaintext", make_contender("dlock-watchdog", url), &stats, nullptr, 0, {}});
    entries.push_back({"floor, TLS", make_contender("floor", tls_url), &tls_stats, nullptr, 0, {}});
    entries.push_back({"dlock, TLS", make_contender("dlock-watchdog", tls_url), &tls_stats, nullptr, 0, {}});
    for (auto& e : entries) {
      e.contender->prepare({"tls"});
      e.session = e.contender->session();
      e.statements = statements_per_cycle(*e.session, "tls", cycles, *e.counter);
    }
    std::vector<Entry*> order;
    for (auto& e : entries) order.push_back(&e);
    std::mt19937 shuffle_rng(20261128);
    for (int i = 0; i < rounds * cycles / 2; ++i) {
      std::shuffle(order.begin(), order.end(), shuffle_rng);
      for (Entry* e : order) {
        const auto t0 = Clock::now();
        e->session->lock("tls");
        e->session->unlock("tls");
        e->samples.push_back(ms(Clock::now() - t0));
      }
    }
    report.section("12. TLS: the uncontended cycle encrypted, beside plaintext",
                   "lock + unlock on one client, interleaved cycle by cycle with the floor on raw connections. "
                   "Plaintext: the private server; TLS: the TLS-only test server (ssl_mode verify_identity; it "
                   "also runs performance_schema), so each is compared with its own server's floor.");
    std::map<std::string, Summary> sum;
    for (auto& e : entries) sum[e.label] = summarize(e.samples);
    std::vector<std::vector<std::string>> rows;
    std::string json = "{";
    for (auto& e : entries) {
      const std::string floor_label = e.label.find("TLS") != std::string::npos ? "floor, TLS" : "floor, plaintext";
      rows.push_back({e.label, num(e.statements, 2), num(sum[e.label].median), num(sum[e.label].p99),
                      num(sum[e.label].median / sum[floor_label].median, 2)});
      json += "\"" + e.label + "\": {\"statements\": " + num(e.statements, 2) + ", \"median_ms\": " +
              num(sum[e.label].median) + ", \"p99_ms\": " + num(sum[e.label].p99) + "}, ";
    }
    report.table({"contender", "statements / cycle", "median ms", "p99 ms", "median vs its floor"}, rows);
    report.json("tls", json.substr(0, json.size() - 2) + "}");
    report.goal({"uncontended cycle over TLS: exactly 2 statements", num(entries[3].statements, 2),
                 entries[3].statements == 2.0, true});
    const double over_floor = sum["dlock, TLS"].median / sum["floor, TLS"].median;
    report.goal({"uncontended latency over TLS: <= 1.05 x the floor over TLS", num(over_floor, 2) + " x",
                 over_floor <= 1.05, false});
    const double tls_cost = sum["dlock, TLS"].median / sum["dlock, plaintext"].median;
    report.goal({"uncontended latency, TLS vs plaintext (reported)", num(tls_cost, 2) + " x", true, false});
  }

  // 10. Election: resign() hands the leadership to a candidate in another
  // process, beside the plain lock's cross-process handoff and the floor in
  // the same run.
  void election() {
    const int n = quick ? 20 : 300;
    report.section("10. Election: resign() to the next leader in another process",
                   "Handover: ms from resign() returning (and from the call) to the candidate in another process "
                   "returning from campaign(), beside the plain lock's unlock() to lock() and the floor (release "
                   "commit, signal, take commit on raw connections), measured the same way in this run.");
    Summary floor_call, lock_call, election_call;
    const Summary floor_return = handoff_cross_process("floor", n, false, "election-floor-op", 1s, "", &floor_call);
    const Summary lock_return = handoff_cross_process("dlock-watchdog", n, false, "election-lock-op", 1s, "", &lock_call);
    const Summary election_return =
        handoff_cross_process("dlock-election", n, false, "election-op", 1s, "", &election_call);
    report.table({"handover, other process", "n", "median ms from return", "p99 ms", "median ms from call",
                  "median vs floor"},
                 {{"floor (two commits)", std::to_string(floor_return.n), num(floor_return.median),
                   num(floor_return.p99), num(floor_call.median), "1.00"},
                  {"dlock-watchdog (lock: unlock() to lock())", std::to_string(lock_return.n), num(lock_return.median),
                   num(lock_return.p99), num(lock_call.median), num(lock_call.median / floor_call.median, 2)},
                  {"dlock-election (resign() to campaign())", std::to_string(election_return.n),
                   num(election_return.median), num(election_return.p99), num(election_call.median),
                   num(election_call.median / floor_call.median, 2)}});
    report.json("election", "{\"handover_ms\": " + num(election_return.median) + ", \"handover_p99_ms\": " +
                                num(election_return.p99) + ", \"handover_from_call_ms\": " + num(election_call.median) +
                                ", \"lock_handoff_ms\": " + num(lock_return.median) + ", \"floor_ms\": " +
                                num(floor_return.median) + "}");
    report.goal({"election handover after resign() returned, other process: median <= 2 ms",
                 num(election_return.median) + " ms", election_return.median <= 2.0, false});
  }

  // 9. MultiLock: an uncontended lock()+unlock() of 1, 8 and 64 names,
  // statements and transactions per cycle counted by the server (Questions,
  // Handler_commit), beside a raw floor on the same table shape: one
  // transaction that updates that many rows (START, UPDATE over an IN list,
  // COMMIT), then one UPDATE that frees them.
  void multi_lock() {
    const int cycles = quick ? 50 : 300;
    report.section("9. Multi-lock: N names taken together, uncontended",
                   "Per lock()+unlock() cycle: statements (the median cycle) and transactions the server counted, "
                   "and the median latency, beside the floor (one raw transaction updating N rows, then one raw "
                   "UPDATE freeing them), alternating in blocks.");
    Options o = Options::from_url(url);
    o.table = "bench_multi";
    // No renewal tick inside the count (one every 10 s by default, and a
    // slow build spends that long here): background load is section 5's.
    o.watchdog_timeout = std::chrono::minutes(10);
    DatabaseDistributedLock client(o);
    auto raw = details::Connection::open(details::ConnectionSettings::from(o));
    std::vector<std::vector<std::string>> rows;
    std::string json = "{";
    for (const int n : {1, 8, 64}) {
      std::vector<std::string> names;
      for (int i = 0; i < n; ++i) names.push_back("multi-" + std::to_string(n) + "-" + std::to_string(i));
      MultiLock set = client.get_multi_lock(names);
      std::vector<std::string> floor_names;
      for (const auto& name : names) floor_names.push_back("floor-" + name);
      std::string in = "(";
      for (std::size_t i = 0; i < floor_names.size(); ++i) in += i == 0 ? "?" : ", ?";
      in += ")";
      raw->execute_plain("INSERT IGNORE INTO `bench_multi` (kind, lock_name, slot) VALUES " + [&] {
        std::string v;
        for (const auto& f : floor_names) v += (v.empty() ? "" : ", ") + std::string("(1, '") + f + "', 0)";
        return v;
      }());
      auto& take = raw->prepared("UPDATE `bench_multi` SET state = 1, hold_id = ?, acquired_at = NOW(6), expire_time ="
                                 " NOW(6) + INTERVAL 30 SECOND, fence = fence + 1 WHERE kind = 1 AND slot = 0 AND"
                                 " lock_name IN " + in + " AND expire_time <= NOW(6)");
      auto& free = raw->prepared("UPDATE `bench_multi` SET state = 0, expire_time = acquired_at WHERE kind = 1 AND"
                                 " slot = 0 AND lock_name IN " + in + " AND hold_id = ?");
      std::uint64_t hold = 0;
      const auto floor_cycle = [&] {
        ++hold;
        raw->execute_plain("START TRANSACTION");
        unsigned at = 1;
        take.setUInt64(at++, hold);
        for (const auto& f : floor_names) take.setString(at++, f);
        if (take.executeUpdate() != n) throw std::runtime_error("multi-lock floor: a row was not free");
        raw->execute_plain("COMMIT");
        at = 1;
        for (const auto& name : floor_names) free.setString(at++, name);
        free.setUInt64(at, hold);
        free.executeUpdate();
      };
      const auto dlock_cycle = [&] {
        set.lock();
        set.unlock();
      };
      // Transactions: the fewest of two runs each (a watchdog tick is not the cycle's).
      const auto count = [&](const std::function<void()>& cycle, const char* status) {
        for (int i = 0; i < 10; ++i) cycle();
        double best = -1;
        for (int run = 0; run < 2; ++run) {
          const auto before = std::stoll(stats.scalar(std::string("SHOW GLOBAL STATUS LIKE '") + status + "'"));
          for (int i = 0; i < cycles; ++i) cycle();
          const auto after = std::stoll(stats.scalar(std::string("SHOW GLOBAL STATUS LIKE '") + status + "'"));
          const double per = static_cast<double>(after - before - 1) / cycles;
          if (best < 0 || per < best) best = per;
        }
        return best;
      };
      // Statements: each cycle counted alone, the median. The server counts
      // every client's statements, and another client's background work
      // (a ring when a session is idle, a renewal, a poll) lands in a few
      // cycles of a run, never in most.
      const auto statements_of = [&](const std::function<void()>& cycle) {
        for (int i = 0; i < 10; ++i) cycle();
        std::vector<double> each;
        for (int i = 0; i < cycles; ++i) {
          const auto before = std::stoll(stats.scalar("SHOW GLOBAL STATUS LIKE 'Questions'"));
          cycle();
          const auto after = std::stoll(stats.scalar("SHOW GLOBAL STATUS LIKE 'Questions'"));
          each.push_back(static_cast<double>(after - before - 1));
        }
        return summarize(each).median;
      };
      const double floor_statements = statements_of(floor_cycle);
      const double dlock_statements = statements_of(dlock_cycle);
      const double floor_commits = count(floor_cycle, "Handler_commit");
      const double dlock_commits = count(dlock_cycle, "Handler_commit");
      std::vector<double> floor_ms, dlock_ms;
      for (int block = 0; block < (quick ? 2 : 6); ++block) {
        for (int i = 0; i < cycles / 4; ++i) {
          auto t0 = Clock::now();
          floor_cycle();
          floor_ms.push_back(ms(Clock::now() - t0));
        }
        for (int i = 0; i < cycles / 4; ++i) {
          auto t0 = Clock::now();
          dlock_cycle();
          dlock_ms.push_back(ms(Clock::now() - t0));
        }
      }
      const auto fl = summarize(floor_ms), dl = summarize(dlock_ms);
      rows.push_back({std::to_string(n) + " names, floor", num(floor_statements, 2), num(floor_commits, 2),
                      num(fl.median), "1.00"});
      rows.push_back({std::to_string(n) + " names, dlock", num(dlock_statements, 2), num(dlock_commits, 2),
                      num(dl.median), num(dl.median / fl.median, 2)});
      json += std::string(n == 1 ? "" : ", ") + "\"" + std::to_string(n) + "\": {\"statements\": " +
              num(dlock_statements, 2) + ", \"floor_statements\": " + num(floor_statements, 2) +
              ", \"transactions\": " + num(dlock_commits, 2) + ", \"floor_transactions\": " + num(floor_commits, 2) +
              ", \"median_ms\": " + num(dl.median) + ", \"floor_median_ms\": " + num(fl.median) + "}";
      report.goal({"multi-lock of " + std::to_string(n) + " names: lock() at most 3 statements, unlock() 1",
                   num(dlock_statements, 2) + " per cycle", dlock_statements <= 4.0, true});
      report.goal({"multi-lock of " + std::to_string(n) + " names: as many transactions per cycle as the floor",
                   num(dlock_commits, 2) + " vs " + num(floor_commits, 2), dlock_commits <= floor_commits, true});
    }
    report.table({"cycle", "statements", "transactions (Handler_commit)", "median ms", "vs floor"}, rows);
    report.json("multi_lock", json + "}");
  }

  // 1b. Where the time of an uncontended cycle goes: wall time per cycle
  // split into the client's CPU (every thread of this process, dlock's
  // background threads included), the server's CPU (every thread of the
  // mysqld process, from /proc), and the rest (waiting for the log's fsync,
  // and for the scheduler on a machine both share), with the server's
  // fsyncs and redo log bytes per cycle. Contenders run in alternating
  // blocks.
  void breakdown() {
    const long server_pid = server_process_id();
    const int cycles = quick ? 200 : 1000;
    const int blocks = quick ? 2 : 6;
    const std::vector<std::string> order = {"floor", "floor-one-table", "dlock-no-wakeup", "dlock-watchdog",
                                            "dlock-async"};
    struct Totals {
      double wall_ns = 0, client_ns = 0, server_ns = 0, fsyncs = 0, redo = 0;
      long cycles = 0;
    };
    std::map<std::string, Totals> totals;
    std::map<std::string, std::unique_ptr<Session>> sessions;
    for (const auto& name : order) {
      contenders[name]->prepare({"breakdown"});
      sessions[name] = contenders[name]->session();
      for (int i = 0; i < 20; ++i) {
        sessions[name]->lock("breakdown");
        sessions[name]->unlock("breakdown");
      }
    }
    const auto fsyncs = [&] { return std::stod(stats.scalar("SHOW GLOBAL STATUS LIKE 'Innodb_data_fsyncs'")); };
    const auto redo = [&] { return std::stod(stats.scalar("SHOW GLOBAL STATUS LIKE 'Innodb_os_log_written'")); };
    // A new order each round, as in scenario 1: the server's background
    // work after a block (purging its undo) falls on whichever comes next.
    auto round_order = order;
    std::mt19937 shuffle_rng(20261125);
    for (int b = 0; b < blocks; ++b) {
      std::shuffle(round_order.begin(), round_order.end(), shuffle_rng);
      for (const auto& name : round_order) {
        auto& s = *sessions[name];
        const double f0 = fsyncs();
        const double r0 = redo();
        const auto server0 = thread_cpu_ns(server_pid);
        const auto client0 = self_cpu_ns();
        const auto t0 = now_ns();
        for (int i = 0; i < cycles; ++i) {
          s.lock("breakdown");
          s.unlock("breakdown");
        }
        const auto t1 = now_ns();
        const auto client1 = self_cpu_ns();
        const auto server1 = thread_cpu_ns(server_pid);
        auto& t = totals[name];
        t.wall_ns += static_cast<double>(t1 - t0);
        t.client_ns += static_cast<double>(client1 - client0);
        t.server_ns += static_cast<double>(cpu_between(server0, server1));
        t.fsyncs += fsyncs() - f0;
        t.redo += redo() - r0;
        t.cycles += cycles;
      }
    }
    report.section("1b. Where the time of an uncontended cycle goes",
                   "Per lock+unlock cycle, in blocks of " + std::to_string(cycles) +
                       " cycles, contenders alternating in a new order each round: wall time, CPU of this process "
                       "(client; dlock's background "
                       "threads included), CPU of the server process (/proc/PID/task/*/schedstat; a server thread "
                       "that ends during a block is left out), the rest (the log's "
                       "fsync and waiting for a core), the server's fsyncs, and the bytes it wrote to its redo log "
                       "(Innodb_os_log_written: the row changes, their undo, and the commit records)." +
                       (server_pid > 0 ? std::string() : std::string(" The server's process was not readable here.")));
    std::vector<std::vector<std::string>> rows;
    std::string json = "{";
    const auto& floor = totals["floor"];
    for (const auto& name : order) {
      const auto& t = totals[name];
      const double c = static_cast<double>(t.cycles);
      const double wall = t.wall_ns / c / 1000, client = t.client_ns / c / 1000,
                   server = server_pid > 0 ? t.server_ns / c / 1000 : 0;
      rows.push_back({name, num(wall, 0), num(client, 0), server_pid > 0 ? num(server, 0) : "-",
                      num(wall - client - server, 0), num(t.fsyncs / c, 2), num(t.redo / c, 0),
                      num((t.wall_ns / c) / (floor.wall_ns / static_cast<double>(floor.cycles)), 2)});
      json += "\"" + name + "\": {\"wall_us\": " + num(wall, 1) + ", \"client_cpu_us\": " + num(client, 1) +
              ", \"server_cpu_us\": " + num(server, 1) + ", \"fsyncs\": " + num(t.fsyncs / c, 2) + ", \"redo_bytes\": " + num(t.redo / c, 0) + "}, ";
    }
    report.table({"contender", "wall us / cycle", "client CPU us", "server CPU us", "rest us (fsync, waiting)",
                  "server fsyncs / cycle", "redo bytes / cycle", "wall vs floor"},
                 rows);
    report.json("breakdown", json.substr(0, json.size() - 2) + "}");
  }

  // The server's process id, when it runs on this machine and its pid file
  // is readable (the private test server); 0 otherwise.
  long server_process_id() {
    try {
      std::ifstream in(stats.scalar("SELECT @@pid_file"));
      long pid = 0;
      if (in >> pid && pid > 0 && std::filesystem::exists("/proc/" + std::to_string(pid) + "/task")) return pid;
    } catch (const std::exception&) {
    }
    return 0;
  }

  // CPU time of each thread of process `pid` (ns, by thread id), from
  // /proc/PID/task/*/schedstat (nanosecond precision); empty if unreadable.
  static std::map<long, std::int64_t> thread_cpu_ns(long pid) {
    std::map<long, std::int64_t> by_thread;
    if (pid <= 0) return by_thread;
    std::error_code ec;
    for (const auto& task : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/task", ec)) {
      std::ifstream in(task.path() / "schedstat");
      std::int64_t on_cpu = 0;
      if (in >> on_cpu) by_thread[std::stol(task.path().filename().string())] = on_cpu;
    }
    return by_thread;
  }

  // CPU the threads of a process used between two readings: a thread that
  // started in between counts whole, one that ended is left out (the
  // server ends idle background threads, and their whole past CPU would
  // otherwise come off the total).
  static std::int64_t cpu_between(const std::map<long, std::int64_t>& before,
                                  const std::map<long, std::int64_t>& after) {
    std::int64_t total = 0;
    for (const auto& [tid, ns] : after) {
      const auto it = before.find(tid);
      total += it == before.end() ? ns : std::max<std::int64_t>(0, ns - it->second);
    }
    return total;
  }

  static std::int64_t self_cpu_ns() {
    timespec ts{};
    ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
  }

  // 8. Single writer on a Galera cluster (every client on one node),
  // beside the run's single server: the uncontended cycle and the
  // cross-client handoffs, interleaved so both see the same machine load.
  void cluster(const std::string& cluster_url) {
    const int cycles = quick ? 100 : 300;
    const int rounds = quick ? 2 : 6;
    const int handoffs = quick ? 20 : 100;
    ServerStats cluster_stats(cluster_url);
    struct Side {
      std::string label, contender, at;
      std::unique_ptr<Contender> c;
      std::unique_ptr<Session> s;
      double statements = 0;
      std::vector<double> samples;
    };
    std::vector<Side> sides;
    for (const char* contender : {"floor", "dlock-watchdog"})
      for (const std::string& at : {url, cluster_url})
        sides.push_back({std::string(contender) + (at == url ? " / one server" : " / cluster node"), contender, at,
                         nullptr, nullptr, 0, {}});
    for (auto& side : sides) {
      side.c = make_contender(side.contender, side.at);
      side.c->prepare({"uncontended-cluster"});
      side.s = side.c->session();
      // Short runs, the fewest of 10: HAProxy's health checks (two a second
      // on node 1) count as statements too, and a short run often has none.
      side.statements = statements_per_cycle(*side.s, "uncontended-cluster", 50,
                                             side.at == url ? stats : cluster_stats, 10);
    }
    for (int i = 0; i < rounds * cycles / 2; ++i) {
      for (std::size_t k = 0; k < sides.size(); ++k) {
        auto& side = sides[(static_cast<std::size_t>(i) + k) % sides.size()];
        const auto t0 = Clock::now();
        side.s->lock("uncontended-cluster");
        side.s->unlock("uncontended-cluster");
        side.samples.push_back(ms(Clock::now() - t0));
      }
    }
    const auto median = [&](std::size_t i) { return summarize(sides[i].samples).median; };
    // sides: 0 floor/server, 1 floor/cluster, 2 dlock/server, 3 dlock/cluster
    report.section("8. Single writer on a Galera cluster vs one server",
                   "Every client on node 1 of the three-node test bed (scripts/cluster.sh), beside the private single "
                   "server, cycles interleaved; statements counted by each server.");
    std::vector<std::vector<std::string>> rows;
    std::string json = "{";
    for (std::size_t i = 0; i < sides.size(); ++i) {
      const auto sm = summarize(sides[i].samples);
      const std::size_t floor_index = sides[i].at == url ? 0 : 1;
      const std::size_t server_index = sides[i].contender == "floor" ? 0 : 2;
      rows.push_back({sides[i].label, num(sides[i].statements, 2), num(sm.median), num(sm.p99),
                      num(sm.median / median(floor_index), 2), num(sm.median / median(server_index), 2)});
      json += "\"" + sides[i].label + "\": {\"statements\": " + num(sides[i].statements, 2) +
              ", \"median_ms\": " + num(sm.median) + ", \"p99_ms\": " + num(sm.p99) + "}, ";
    }
    report.table({"contender / where", "statements / cycle", "median ms", "p99 ms", "vs floor, same place",
                  "vs one server"},
                 rows);
    report.goal({"cluster, uncontended cycle: exactly 2 statements (counted by node 1)", num(sides[3].statements, 2),
                 sides[3].statements == 2.0, true});
    const double cycle_ratio = median(3) / median(2);
    // A commit on the cluster is replicated and certified, and on this
    // test bed the three nodes share one disk and two cores: what that
    // costs is the floor's own ratio, beside.
    const double commit_ratio = median(1) / median(0);
    report.goal({"cluster, uncontended cycle: <= 1.3 x the same cycle on one server (the floor's own ratio: " +
                     num(commit_ratio, 2) + " x)",
                 num(cycle_ratio, 2) + " x", cycle_ratio <= 1.3, false});
    report.goal({"cluster, uncontended cycle: <= 1.10 x the floor on the same node", num(median(3) / median(1), 2) + " x",
                 median(3) / median(1) <= 1.10, false});

    std::vector<std::vector<std::string>> handoff_rows;
    std::map<std::string, Summary> by;
    for (const std::string& at : {url, cluster_url}) {
      const std::string where = at == url ? "one server" : "cluster node";
      auto holder_client = make_contender("dlock-watchdog", at);
      auto other_client = make_contender("dlock-watchdog", at);
      auto h = holder_client->session();
      auto w = other_client->session();
      by[where + " / other client"] = handoff_in_process(*h, *w, handoffs, false, "handoff-cl-oc");
      by[where + " / other process"] =
          handoff_cross_process("dlock-watchdog", handoffs, false, "handoff-cl-op", 1s, at);
    }
    for (const char* who : {"other client", "other process"}) {
      const auto& one = by[std::string("one server / ") + who];
      const auto& node = by[std::string("cluster node / ") + who];
      handoff_rows.push_back({who, num(one.median), num(one.p99), num(node.median), num(node.p99),
                              num(node.median / one.median, 2)});
      json += "\"handoff " + std::string(who) + "\": {\"server_median_ms\": " + num(one.median) +
              ", \"cluster_median_ms\": " + num(node.median) + "}, ";
      report.goal({std::string("cluster, cross-client handoff (") + who +
                       ", bell): median <= 1.3 x one server's",
                   num(node.median / one.median, 2) + " x", node.median <= 1.3 * one.median, false});
      // A handoff is one commit (the waiter's take) after the wake: on the
      // cluster it pays what a commit costs there, and no more.
      const double scaled = node.median / one.median / commit_ratio;
      report.goal({std::string("cluster, cross-client handoff (") + who +
                       "): median <= 1.3 x one server's times the floor's ratio (a commit's cost)",
                   num(scaled, 2) + " x", scaled <= 1.3, false});
    }
    report.table({"handoff (ms from unlock())", "one server median", "p99", "cluster node median", "p99",
                  "cluster vs one server"},
                 handoff_rows);
    report.json("cluster", json.substr(0, json.size() - 2) + "}");
  }

  // 4. Handoff: unlock() returning in the holder to lock() returning in the waiter.
  // What one thread handing a result to another that is asleep costs on
  // this machine (post to an idle worker, the worker sets a promise, the
  // caller wakes): the part of an asynchronous handoff no design avoids,
  // since the statement runs on a worker and the caller resumes on its own
  // thread.
  Summary thread_wake(int samples) {
    std::vector<double> out;
    std::mutex m;
    std::condition_variable cv;
    bool go = false, quit = false;
    std::promise<std::int64_t>* reply = nullptr;
    std::thread worker([&] {
      for (;;) {
        std::unique_lock<std::mutex> l(m);
        cv.wait(l, [&] { return go || quit; });
        if (quit) return;
        go = false;
        reply->set_value(now_ns());
      }
    });
    for (int i = 0; i < samples; ++i) {
      std::this_thread::sleep_for(20ms);  // both threads idle, as a parked waiter's are
      std::promise<std::int64_t> p;
      auto f = p.get_future();
      const auto t0 = now_ns();
      {
        std::lock_guard<std::mutex> g(m);
        reply = &p;
        go = true;
      }
      cv.notify_one();
      f.get();
      out.push_back(static_cast<double>(now_ns() - t0) / 1e6);
    }
    {
      std::lock_guard<std::mutex> g(m);
      quit = true;
    }
    cv.notify_one();
    worker.join();
    return summarize(out);
  }

  // From unlock() returning; `from_call` (if given) gets the same handoffs
  // measured from unlock() being called (the release's commit included).
  // `raw`, `raw_call` (if given) get the samples appended, unsummarized.
  Summary handoff_in_process(Session& holder, Session& waiter, int samples, bool polled,
                             const std::string& name = "handoff", Summary* from_call = nullptr,
                             std::vector<double>* raw = nullptr, std::vector<double>* raw_call = nullptr) {
    std::vector<double> out_call;
    std::mutex m;
    std::condition_variable cv;
    int phase = 0;  // 1: waiter may start, 2: waiter done
    std::int64_t acquired_ns = 0;
    std::vector<double> out;
    std::thread w([&] {
      for (int i = 0; i < samples; ++i) {
        {
          std::unique_lock<std::mutex> l(m);
          cv.wait(l, [&] { return phase == 1; });
        }
        waiter.lock(name);
        const auto t1 = now_ns();
        waiter.unlock(name);
        std::lock_guard<std::mutex> g(m);
        acquired_ns = t1;
        phase = 2;
        cv.notify_all();
      }
    });
    for (int i = 0; i < samples; ++i) {
      holder.lock(name);
      {
        std::lock_guard<std::mutex> g(m);
        phase = 1;
        cv.notify_all();
      }
      std::this_thread::sleep_for(park_time(polled));
      const auto called = now_ns();
      holder.unlock(name);
      const auto t0 = now_ns();
      std::unique_lock<std::mutex> l(m);
      cv.wait(l, [&] { return phase == 2; });
      phase = 0;
      out.push_back(static_cast<double>(acquired_ns - t0) / 1e6);
      out_call.push_back(static_cast<double>(acquired_ns - called) / 1e6);
    }
    w.join();
    if (raw) raw->insert(raw->end(), out.begin(), out.end());
    if (raw_call) raw_call->insert(raw_call->end(), out_call.begin(), out_call.end());
    if (from_call) *from_call = summarize(out_call);
    return summarize(out);
  }

  // Same-client handoffs of several contenders, interleaved in rounds of a
  // few handoffs each, so that a slow phase of the disk (its group commit
  // swings for seconds at a time) falls on all of them alike and their
  // ratios compare like with like. Per contender: from unlock() returning,
  // and from unlock() being called.
  struct HandoffPair {
    Summary from_return;
    Summary from_call;
  };
  // The same for waiters in another process (a child per contender and
  // round: rounds of twenty).
  std::map<std::string, HandoffPair> cross_process_handoffs_interleaved(const std::vector<std::string>& who,
                                                                        int samples, const std::string& tag) {
    constexpr int kRound = 20;
    std::vector<std::vector<double>> raw(who.size()), raw_call(who.size());
    for (int done = 0; done < samples; done += kRound) {
      for (std::size_t i = 0; i < who.size(); ++i) {
        handoff_cross_process(who[i], std::min(kRound, samples - done), false, tag + "-" + std::to_string(i), 1s, "",
                              nullptr, false, &raw[i], &raw_call[i]);
      }
    }
    std::map<std::string, HandoffPair> out;
    for (std::size_t i = 0; i < who.size(); ++i) out[who[i]] = HandoffPair{summarize(raw[i]), summarize(raw_call[i])};
    return out;
  }

  // `who`: contender names; one ending in kSyncHolder is that contender's
  // waiter with a synchronous holder of the same client (sync_session()).
  static constexpr const char* kSyncHolder = " / synchronous holder";
  std::map<std::string, HandoffPair> same_client_handoffs_interleaved(const std::vector<std::string>& who,
                                                                      int samples, const std::string& tag) {
    constexpr int kRound = 10;
    struct Pair {
      std::unique_ptr<Session> holder, waiter;
      std::vector<double> raw, raw_call;
    };
    std::vector<Pair> pairs;
    for (const auto& label : who) {
      const auto cut = label.find(kSyncHolder);
      Contender& c = *contenders[label.substr(0, cut)];
      pairs.push_back(Pair{cut == std::string::npos ? c.session() : c.sync_session(), c.session(), {}, {}});
    }
    for (int done = 0; done < samples; done += kRound) {
      for (std::size_t i = 0; i < who.size(); ++i) {
        handoff_in_process(*pairs[i].holder, *pairs[i].waiter, std::min(kRound, samples - done), false,
                           tag + "-" + std::to_string(i), nullptr, &pairs[i].raw, &pairs[i].raw_call);
      }
    }
    std::map<std::string, HandoffPair> out;
    for (std::size_t i = 0; i < who.size(); ++i)
      out[who[i]] = HandoffPair{summarize(pairs[i].raw), summarize(pairs[i].raw_call)};
    return out;
  }

  // The physical floor of a handoff: the holder's release commit, then the
  // waiter (told at once, in-process or through a pipe) takes with one
  // commit: two raw conditional UPDATEs on two connections, measured from
  // the release being sent to the take returning.
  Summary floor_handoff_in_process(int samples) {
    auto& c = *contenders["floor"];
    c.prepare({"handoff-floor"});
    auto holder = c.session();
    auto waiter = c.session();
    std::mutex m;
    std::condition_variable cv;
    int phase = 0;  // 1: take now, 2: taken
    std::int64_t taken_ns = 0;
    std::thread w([&] {
      for (int i = 0; i < samples; ++i) {
        {
          std::unique_lock<std::mutex> l(m);
          cv.wait(l, [&] { return phase == 1; });
        }
        waiter->lock("handoff-floor");
        const auto t1 = now_ns();
        waiter->unlock("handoff-floor");
        std::lock_guard<std::mutex> g(m);
        taken_ns = t1;
        phase = 2;
        cv.notify_all();
      }
    });
    std::vector<double> out;
    for (int i = 0; i < samples; ++i) {
      holder->lock("handoff-floor");
      std::this_thread::sleep_for(20ms);
      const auto called = now_ns();
      holder->unlock("handoff-floor");
      std::unique_lock<std::mutex> l(m);
      phase = 1;
      cv.notify_all();
      cv.wait(l, [&] { return phase == 2; });
      phase = 0;
      out.push_back(static_cast<double>(taken_ns - called) / 1e6);
    }
    w.join();
    return summarize(out);
  }

  // `at`: the server (default: the run's).
  // `from_call`: as in handoff_in_process. `fresh_names`: every handoff on
  // a name never used before (the first time a name is contended). The
  // floor's waiter is told after the release (it does not wait: it takes).
  Summary handoff_cross_process(const std::string& contender, int samples, bool polled,
                                const std::string& name = "handoff-x", std::chrono::microseconds poll = 1s,
                                const std::string& at = "", Summary* from_call = nullptr, bool fresh_names = false,
                                std::vector<double>* raw = nullptr, std::vector<double>* raw_call = nullptr) {
    std::vector<double> out_call;
    const bool floor = contender == "floor";
    const std::string& where = at.empty() ? url : at;
    std::unique_ptr<Contender> own;
    if (contenders.count(contender) == 0 || where != url) own = make_contender(contender, where);
    auto holder = (own ? *own : *contenders[contender]).session();
    test::ChildProcess child(self_path, {"--child-waiter", where, contender, name}, false, true);
    if (!child.wait_for_line("ready", 60s)) throw std::runtime_error("child waiter did not start");
    std::vector<double> out;
    const std::string run_tag = std::to_string(now_ns());
    for (int i = 0; i < samples; ++i) {
      const std::string n = fresh_names ? name + "-" + run_tag + "-" + std::to_string(i) : name;
      if (floor) (own ? *own : *contenders[contender]).prepare({n});
      holder->lock(n);
      if (!floor) child_write(child, "go " + n + "\n");
      std::this_thread::sleep_for(park_time(polled, poll));
      const auto called = now_ns();
      holder->unlock(n);
      const auto t0 = now_ns();
      if (floor) child_write(child, "go " + n + "\n");
      auto line = child.wait_for_line("t1 ", 60s);
      if (!line) throw std::runtime_error("child waiter stopped answering");
      out.push_back(static_cast<double>(std::stoll(line->substr(3)) - t0) / 1e6);
      out_call.push_back(static_cast<double>(std::stoll(line->substr(3)) - called) / 1e6);
    }
    if (raw) raw->insert(raw->end(), out.begin(), out.end());
    if (raw_call) raw_call->insert(raw_call->end(), out_call.begin(), out_call.end());
    if (from_call) *from_call = summarize(out_call);
    child_write(child, "quit\n");
    child.wait(10s);
    return summarize(out);
  }

  static void child_write(test::ChildProcess& child, const std::string& text) { child.write(text); }

  void handoff() {
    const int local = quick ? 40 : 200;
    const int remote = quick ? 20 : 200;
    const int seed_remote = quick ? 3 : 150;
    report.section("4. Contended handoff (ms from unlock() returning to the waiter's lock() returning)",
                   "The holder keeps the lock 20 ms so the waiter is parked; where the waiter depends on a poll (the "
                   "seed), plus a random part of one poll interval, so releases fall at every phase of the poll. A "
                   "waiter in another client or process is woken by the holder's bell (fast_wakeup, the default); "
                   "the seed's waiter learns of a release at its next 1 s poll. A lock, write-side or permit waiter "
                   "in the same client is handed the hold (or permit) by the release statement itself (one commit "
                   "instead of a release and a take), so its lock() can return before the holder's unlock() does (a "
                   "time below zero). The goals that compare another waiter with the synchronous lock's use times "
                   "from unlock() being called (release commit included), which are never below zero. The "
                   "same-client and other-process handoffs "
                   "of the lock, async, semaphore and write contenders are measured interleaved (rounds of 10 and 20 "
                   "handoffs), so a slow phase of the disk falls on all alike; the async waiter also with a "
                   "synchronous holder, which separates the waiter's side from the holder's async_unlock.");
    std::vector<std::vector<std::string>> rows;
    std::string json = "{";
    std::ofstream dat(out_dir + "/handoff.dat");
    dat << "# case median p99\n";
    auto add = [&](const std::string& who, const std::string& where, Summary s) {
      rows.push_back({who, where, std::to_string(s.n), num(s.median), num(s.p99)});
      json += "\"" + who + " / " + where + "\": {\"median_ms\": " + num(s.median) + ", \"p99_ms\": " + num(s.p99) +
              ", \"n\": " + std::to_string(s.n) + "}, ";
      dat << "\"" << who << "\\n" << where << "\" " << num(s.median) << " " << num(s.p99) << "\n";
      return s;
    };
    Summary seed_result;
    {
      auto& c = *contenders["dlock-watchdog"];
      auto h = c.session();
      // Same client: the synchronous lock and the waiters compared with it,
      // interleaved.
      const std::string async_waiter = std::string("dlock-async") + kSyncHolder;
      const auto same = same_client_handoffs_interleaved(
          {"dlock-watchdog", "dlock-async", async_waiter, "dlock-semaphore", "dlock-write"}, local, "handoff-same");
      // Another process: the same four, interleaved.
      const auto process = cross_process_handoffs_interleaved(
          {"dlock-watchdog", "dlock-async", "dlock-semaphore", "dlock-write"}, remote, "handoff-op");
      // From unlock() being called: what the "x synchronous lock's" goals compare.
      const Summary s_call = same.at("dlock-watchdog").from_call;
      const Summary p_call = process.at("dlock-watchdog").from_call;
      const auto s = add("dlock-watchdog", "same client", same.at("dlock-watchdog").from_return);
      report.goal({"same-client handoff median <= 1 ms", num(s.median) + " ms", s.median <= 1.0, false});
      // The seed's poll-bound case takes about a second per handoff; it runs
      // alongside (its own name and table).
      auto seed_process = std::async(std::launch::async, [&] {
        return handoff_cross_process("seed", seed_remote, true, "handoff-seed");
      });
      auto other = make_contender("dlock-watchdog", url);
      auto w2 = other->session();
      add("dlock-watchdog", "other client, same process", handoff_in_process(*h, *w2, remote, false, "handoff-oc"));
      const auto p = add("dlock-watchdog", "other process", process.at("dlock-watchdog").from_return);
      report.goal({"cross-process handoff median <= 2 ms", num(p.median) + " ms", p.median <= 2.0, false});
      report.goal({"cross-process handoff p99 <= 20 ms", num(p.p99) + " ms", p.p99 <= 20.0, false});
      // The same handoffs with the asynchronous waiter (a parked
      // continuation, not a blocked thread) and through the permits of a
      // one-permit semaphore, same run.
      const auto beside = [&](const std::string& contender, const std::string& what) {
        const Summary mine = same.at(contender).from_call;
        const Summary theirs = process.at(contender).from_call;
        add(contender, "same client", same.at(contender).from_return);
        add(contender, "other process", process.at(contender).from_return);
        report.goal({what + " handoff from unlock() called, same client: median <= 1.2 x synchronous lock's",
                     num(mine.median / s_call.median, 2) + " x", mine.median <= 1.2 * s_call.median, false});
        report.goal({what + " handoff from unlock() called, other process: median <= 1.2 x synchronous lock's",
                     num(theirs.median / p_call.median, 2) + " x", theirs.median <= 1.2 * p_call.median, false});
      };
      beside("dlock-async", "async holder and waiter");
      {
        // Issue 13's goal is about the waiter: the same waiter with a
        // synchronous holder, so the holder's own async_unlock (a hop to a
        // worker that has gone to sleep during the hold) is not charged to
        // the waiter.
        const Summary mine = same.at(async_waiter).from_call;
        add("dlock-async", "same client, synchronous holder", same.at(async_waiter).from_return);
        report.goal({"async waiter's handoff from unlock() called, same client, synchronous holder: median <= 1.2 x "
                     "synchronous waiter's",
                     num(mine.median / s_call.median, 2) + " x", mine.median <= 1.2 * s_call.median, false});
      }
      beside("dlock-semaphore", "semaphore");
      beside("dlock-write", "write lock");
      seed_result = seed_process.get();
    }
    {
      auto& c = *contenders["get_lock"];
      auto h = c.session();
      auto w = c.session();
      add("get_lock", "other connection", handoff_in_process(*h, *w, local, false));
      add("get_lock", "other process", handoff_cross_process("get_lock", local, false));
    }
    add("seed", "other process", seed_result);
    add("(floor of a hop)", "thread wake: idle thread to idle thread and back", thread_wake(local));
    report.table({"contender", "waiter", "handoffs", "median ms", "p99 ms"}, rows);
    report.json("handoff", json.substr(0, json.size() - 2) + "}");
  }

  // 4c. Fairness among semaphore waiters in several clients.
  void semaphore_fairness() {
    const int clients = 3, threads = 2, cycles = quick ? 15 : 60;
    constexpr std::uint32_t kPermits = 2;
    Options o = Options::from_url(url);
    o.table = "bench_dlock";
    std::vector<std::unique_ptr<DatabaseDistributedLock>> owners;
    for (int c = 0; c < clients; ++c) owners.push_back(std::make_unique<DatabaseDistributedLock>(o));
    std::mutex m;
    std::vector<double> waits;
    std::vector<int> per_client(clients, 0);
    std::vector<std::thread> workers;
    for (int c = 0; c < clients; ++c) {
      for (int t = 0; t < threads; ++t) {
        workers.emplace_back([&, c] {
          Semaphore s = owners[static_cast<std::size_t>(c)]->get_semaphore("fairness", kPermits);
          for (int i = 0; i < cycles; ++i) {
            const auto t0 = Clock::now();
            Permit p = s.acquire();
            const double waited = ms(Clock::now() - t0);
            std::this_thread::sleep_for(5ms);  // the work the permit admits
            p.release();
            {
              std::lock_guard<std::mutex> g(m);
              waits.push_back(waited);
              ++per_client[static_cast<std::size_t>(c)];
            }
            std::this_thread::sleep_for(1ms);
          }
        });
      }
    }
    for (auto& w : workers) w.join();
    const auto sum = summarize(waits);
    const double longest = *std::max_element(waits.begin(), waits.end());
    report.section("4c. Fairness among semaphore waiters",
                   std::to_string(clients) + " clients x " + std::to_string(threads) + " threads, " +
                       std::to_string(cycles) + " acquisitions each, of a semaphore of " + std::to_string(kPermits) +
                       " permits held 5 ms each: how long each acquire waited.");
    report.table({"acquisitions", "median wait ms", "p99 wait ms", "max wait ms", "max / median"},
                 {{std::to_string(sum.n), num(sum.median), num(sum.p99), num(longest),
                   num(longest / std::max(sum.median, 1e-3), 1)}});
    report.json("semaphore_fairness", "{\"median_ms\": " + num(sum.median) + ", \"p99_ms\": " + num(sum.p99) +
                                          ", \"max_ms\": " + num(longest) + "}");
  }

  // 4d. Writer starvation: readers in several clients re-acquire with
  // overlap, continuously; a writer in another client waits.
  void rw_starvation() {
    const int clients = 3, threads = 2, rounds = quick ? 6 : 30;
    constexpr auto kReadHold = 30ms;
    Options o = Options::from_url(url);
    o.table = "bench_dlock";
    std::vector<std::unique_ptr<DatabaseDistributedLock>> readers;
    for (int c = 0; c < clients; ++c) readers.push_back(std::make_unique<DatabaseDistributedLock>(o));
    DatabaseDistributedLock writer_client(o);
    std::atomic<bool> stop{false};
    std::mutex m;
    std::vector<std::int64_t> read_starts;  // when each read lock() returned (ns)
    double longest_read = 0;                // ms from a read lock() returning to its unlock() returning
    std::vector<std::thread> workers;
    for (int c = 0; c < clients; ++c) {
      for (int t = 0; t < threads; ++t) {
        workers.emplace_back([&, c, t] {
          ReadWriteLock rw = readers[static_cast<std::size_t>(c)]->get_read_write_lock("starve");
          std::this_thread::sleep_for(kReadHold * (c * threads + t) / (clients * threads));  // staggered
          while (!stop) {
            rw.lock_shared();
            const auto t0 = now_ns();
            std::this_thread::sleep_for(kReadHold);
            rw.unlock_shared();
            const double held = static_cast<double>(now_ns() - t0) / 1e6;
            std::lock_guard<std::mutex> g(m);
            read_starts.push_back(t0);
            longest_read = std::max(longest_read, held);
          }
        });
      }
    }
    ReadWriteLock w = writer_client.get_read_write_lock("starve");
    std::vector<double> writer_waits, reader_resumes;
    for (int r = 0; r < rounds; ++r) {
      std::this_thread::sleep_for(150ms);  // readers stream, overlapping
      const auto t0 = now_ns();
      w.lock();
      writer_waits.push_back(static_cast<double>(now_ns() - t0) / 1e6);
      std::this_thread::sleep_for(5ms);
      w.unlock();
      const auto released = now_ns();
      // The first read granted after the write: how fast readers in other
      // clients hear of the write's release.
      std::this_thread::sleep_for(100ms);
      std::lock_guard<std::mutex> g(m);
      std::int64_t first = 0;
      for (auto t : read_starts)
        if (t >= released && (first == 0 || t < first)) first = t;
      if (first != 0) reader_resumes.push_back(static_cast<double>(first - released) / 1e6);
    }
    stop = true;
    for (auto& t : workers) t.join();
    const auto waits = summarize(writer_waits);
    const double worst = *std::max_element(writer_waits.begin(), writer_waits.end());
    const auto resumes = summarize(reader_resumes);
    report.section("4d. Writer starvation (read-write lock)",
                   std::to_string(clients) + " clients x " + std::to_string(threads) +
                       " threads re-acquire the read side continuously, each read held " +
                       std::to_string(kReadHold.count()) + " ms, staggered so reads always overlap; a writer in "
                       "another client takes the write side " + std::to_string(rounds) +
                       " times. Without writer fairness the writer never gets in.");
    report.table({"writer acquisitions", "median wait ms", "max wait ms", "longest read hold ms", "max / longest read",
                  "readers resume after the write, median ms"},
                 {{std::to_string(waits.n), num(waits.median), num(worst), num(longest_read),
                   num(worst / std::max(longest_read, 1e-3), 2), num(resumes.median)}});
    report.json("rw_starvation", "{\"writer_median_ms\": " + num(waits.median) + ", \"writer_max_ms\": " + num(worst) +
                                     ", \"longest_read_ms\": " + num(longest_read) +
                                     ", \"reader_resume_median_ms\": " + num(resumes.median) + "}");
    report.goal({"writer starvation: the writer's longest wait < 2 x the longest read hold",
                 num(worst / std::max(longest_read, 1e-3), 2) + " x", worst < 2 * longest_read, false});
  }

  // 4b. Wake designs (issue 6): how a waiter in another client hears of a release.
  struct WakeDesign {
    std::string contender;
    std::string how;
    bool polled;                      // depends on a poll: spread releases over it
    std::chrono::microseconds poll;   // that poll's period
    int samples;
  };

  // Connections the server has open for the test account now.
  std::int64_t open_connections() {
    return std::stoll(stats.scalar(
        "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE USER = SUBSTRING_INDEX(CURRENT_USER(), '@', 1)"));
  }

  void wake_designs() {
    const int n = quick ? 20 : 200;
    const std::vector<WakeDesign> designs{
        {"dlock-watchdog",
         "session bells: each session holds a user-level lock of its own, recorded in the rows it takes; a waiter "
         "marks the row and blocks in GET_LOCK on the holder's bell; a release rings only a marked row (chosen)",
         false, 1s, n},
        {"kill-wake", "releaser finds sleeping waiters in PROCESSLIST and KILL QUERYs them (prototype)", false, 1s,
         n},
        {"poll-10ms", "poll every 10 ms (fast_wakeup off, poll_interval 10 ms)", true, 10ms, n},
        {"dlock-no-wakeup", "poll every 1 s (fast_wakeup off; the design before issue 6)", true, 1s, quick ? 3 : 30},
    };
    report.section("4b. Wake designs: a waiter in another process",
                   "Each design in one run, same server. Handoff as in section 4 (the waiter is a child process), "
                   "and from unlock() being called (the release's own statements included). "
                   "Statements per uncontended lock+unlock are server-counted. While waiting: one client holds the "
                   "lock, another (in this process) waits on it; server-counted statements per second over a "
                   "window, and the connections the waiting client has open.");
    std::vector<std::vector<std::string>> rows;
    std::string json = "{";
    const auto window = quick ? 3s : 5s;
    for (const auto& d : designs) {
      Summary from_call;
      const Summary h =
          handoff_cross_process(d.contender, d.samples, d.polled, "wake-" + d.contender, d.poll, "", &from_call);

      auto holder_side = make_contender(d.contender, url);
      auto holder = holder_side->session();
      const double per_cycle = statements_per_cycle(*holder, "wake-cycle-" + d.contender, 100);

      const std::string wait_name = "wake-wait-" + d.contender;
      holder->lock(wait_name);
      const auto connections_before = open_connections();
      double per_second = 0;
      std::int64_t connections = 0;
      {
        auto waiter_side = make_contender(d.contender, url);
        auto waiter = waiter_side->session();
        std::thread t([&] {
          waiter->lock(wait_name);
          waiter->unlock(wait_name);
        });
        std::this_thread::sleep_for(2500ms);  // tried, refused, parked
        connections = open_connections() - connections_before;
        stats.reset();
        std::this_thread::sleep_for(window);
        per_second = static_cast<double>(stats.statements_since_last()) /
                     std::chrono::duration<double>(window).count();
        holder->unlock(wait_name);
        t.join();
      }
      rows.push_back({d.contender, d.how, std::to_string(h.n), num(h.median), num(h.p99), num(from_call.median),
                      num(per_cycle, 2), num(per_second, 2), std::to_string(connections)});
      json += "\"" + d.contender + "\": {\"median_ms\": " + num(h.median) + ", \"p99_ms\": " + num(h.p99) +
              ", \"from_call_median_ms\": " + num(from_call.median) +
              ", \"statements_per_cycle\": " + num(per_cycle, 2) + ", \"waiting_statements_per_s\": " +
              num(per_second, 2) + ", \"waiting_client_connections\": " + std::to_string(connections) + "}, ";
      if (d.contender == "dlock-watchdog") {
        report.goal({"bell: cross-process handoff median <= 2 ms", num(h.median) + " ms", h.median <= 2.0, false});
        report.goal({"bell: cross-process handoff p99 <= 20 ms", num(h.p99) + " ms", h.p99 <= 20.0, false});
        report.goal({"bell: uncontended cycle stays 2 statements", num(per_cycle, 2), per_cycle == 2.0, true});
        // The 1 s poll plus one bell wait per io_timeout - 1 s (9 s).
        report.goal({"bell: waiting client <= 1.5 statements / s", num(per_second, 2) + " / s",
                     per_second <= 1.5, false});
      }
    }
    report.table({"design", "how the waiter hears of a release", "handoffs", "median ms", "p99 ms",
                  "median ms from unlock() called", "statements / uncontended cycle", "statements / s while waiting",
                  "connections of waiting client"},
                 rows);
    report.json("wake_designs", json.substr(0, json.size() - 2) + "}");
  }

  // 5. Background load: statements per second from an idle client.
  void background() {
    const auto window = quick ? 3s : 5s;
    report.section("5. Background load of one client (statements per second, server-counted)",
                   "Holding: watchdog_timeout 3 s, so the watchdog ticks every second. Waiting: poll_interval 1 s; "
                   "the holders are another client whose 10-minute lease never needs renewing in the window.");
    std::vector<std::vector<std::string>> rows;
    std::string json = "{";
    for (int holds : {1, 100, 1000}) {
      Options o = Options::from_url(url_with(url, "table=bench_bg&watchdog_timeout_ms=3000"));
      DatabaseDistributedLock client(o);
      for (int i = 0; i < holds; ++i) client.lock("bg-" + std::to_string(i));
      std::this_thread::sleep_for(1500ms);
      stats.reset();
      std::this_thread::sleep_for(window);
      const double per_second = static_cast<double>(stats.statements_since_last()) /
                                std::chrono::duration<double>(window).count();
      const double allowed = static_cast<double>((holds + 511) / 512);
      rows.push_back({"holding " + std::to_string(holds) + " watchdog locks", num(per_second, 2), num(allowed, 0)});
      json += "\"holding_" + std::to_string(holds) + "\": " + num(per_second, 2) + ", ";
      report.goal({"renewal, " + std::to_string(holds) + " holds: <= " + num(allowed, 0) + " statement(s) per tick",
                   num(per_second, 2) + " / s", per_second <= allowed + 0.34, true});
      for (int i = 0; i < holds; ++i) client.unlock("bg-" + std::to_string(i));
    }
    for (int waiters : {1, 100}) {
      Options holder_options = Options::from_url(url_with(url, "table=bench_bg&watchdog_timeout_ms=600000"));
      DatabaseDistributedLock holder(holder_options);
      for (int i = 0; i < waiters; ++i) holder.lock("wait-" + std::to_string(i));
      Options o = Options::from_url(url_with(url, "table=bench_bg&poll_interval_ms=1000&pool_size=16"));
      DatabaseDistributedLock client(o);
      std::vector<std::thread> threads;
      for (int i = 0; i < waiters; ++i) {
        threads.emplace_back([&client, i] {
          client.lock("wait-" + std::to_string(i));
          client.unlock("wait-" + std::to_string(i));
        });
      }
      std::this_thread::sleep_for(2500ms);  // every waiter has tried and parked
      stats.reset();
      std::this_thread::sleep_for(window);
      const double per_second = static_cast<double>(stats.statements_since_last()) /
                                std::chrono::duration<double>(window).count();
      rows.push_back({std::to_string(waiters) + " waiting threads", num(per_second, 2), "1"});
      json += "\"waiting_" + std::to_string(waiters) + "\": " + num(per_second, 2) + ", ";
      report.goal({"polling, " + std::to_string(waiters) + " waiters: <= 1 statement per tick",
                   num(per_second, 2) + " / s", per_second <= 1.34, true});
      for (int i = 0; i < waiters; ++i) holder.unlock("wait-" + std::to_string(i));
      for (auto& t : threads) t.join();
    }
    report.table({"client", "statements / s", "allowed per 1 s tick"}, rows);
    report.json("background", json.substr(0, json.size() - 2) + "}");
  }

  // 6. Memory of one client holding many locks.
  void memory() {
    const int holds = 10'000;
    Options o = Options::from_url(url_with(url, "table=bench_mem"));
    DatabaseDistributedLock client(o);
    client.lock("mem-warm");
    client.unlock("mem-warm");
    const auto before = resident_bytes();
    for (int i = 0; i < holds; ++i) client.lock("mem-" + std::to_string(i));
    const auto after = resident_bytes();
    const double per_lock = static_cast<double>(after - before) / holds;
    report.section("6. Memory", "Resident set of one client before and after acquiring 10,000 locks.");
    report.table({"locks held", "resident MiB", "bytes per lock"},
                 {{std::to_string(holds), num(static_cast<double>(after) / (1 << 20), 1), num(per_lock, 0)}});
    report.json("memory", "{\"locks\": " + std::to_string(holds) + ", \"resident_bytes\": " + std::to_string(after) +
                              ", \"bytes_per_lock\": " + num(per_lock, 0) + "}");
    report.goal({"10,000 held locks: <= 2 KiB per lock", num(per_lock, 0) + " B", per_lock <= 2048, false});
    for (int i = 0; i < holds; ++i) client.unlock("mem-" + std::to_string(i));
  }

  // 7. Pending asynchronous waits: what one costs while it waits.
  void async_waits() {
    const int waits = quick ? 2'000 : 10'000;
    Options o = Options::from_url(url_with(url, "table=bench_async"));
    DatabaseDistributedLock holder(o);
    holder.lock("pending");
    auto client = std::make_unique<DatabaseDistributedLock>(o);
    // Warm-up: the first asynchronous call starts the workers, the first
    // wait on a holder elsewhere a bell connection (the fixed set).
    async_try_lock(client->get_lock("pending", Owner::create()), 100ms, boost::asio::use_future).get();
    auto& core = details::EngineAccess::of(*client);
    const std::size_t threads_before = test::thread_count();
    const std::size_t rss_before = resident_bytes();
    const std::size_t heap_before = heap_bytes();
    std::atomic<int> cancelled{0};
    const auto t0 = Clock::now();
    for (int i = 0; i < waits; ++i) {
      async_lock(client->get_lock("pending", Owner::create()), [&](std::exception_ptr e) {
        if (e) ++cancelled;
      });
    }
    const bool parked = test_wait([&] { return core.waiters().parked() == static_cast<std::size_t>(waits); }, 120s);
    const double start_ms = ms(Clock::now() - t0);
    const std::size_t threads_after = test::thread_count();
    const std::size_t rss_after = resident_bytes();
    const std::size_t heap_after = heap_bytes();
    const auto c0 = Clock::now();
    client.reset();  // cancels every pending wait
    const double cancel_ms = ms(Clock::now() - c0);
    holder.unlock("pending");
    const double per_wait = static_cast<double>(rss_after > rss_before ? rss_after - rss_before : 0) / waits;
    const double heap_per_wait = static_cast<double>(heap_after > heap_before ? heap_after - heap_before : 0) / waits;
    const long added = static_cast<long>(threads_after) - static_cast<long>(threads_before);
    report.section("7. Pending asynchronous waits",
                   "async_lock waits parked on one held name in one client: threads and memory added (resident set; "
                   "bytes allocated, from mallinfo2), measured once all are parked; then the client is destroyed, "
                   "which cancels them all.");
    report.table({"pending waits", "all parked", "threads added", "resident bytes per wait",
                  "heap bytes per wait", "initiate + park ms", "cancel all ms", "cancelled"},
                 {{std::to_string(waits), parked ? "yes" : "NO", std::to_string(added), num(per_wait, 0),
                   num(heap_per_wait, 0), num(start_ms, 0), num(cancel_ms, 0), std::to_string(cancelled.load())}});
    report.json("async_waits", "{\"waits\": " + std::to_string(waits) + ", \"threads_added\": " +
                                   std::to_string(added) + ", \"bytes_per_wait\": " + num(per_wait, 0) + "}");
    report.goal({std::to_string(waits) + " pending async waits: no thread added", std::to_string(added),
                 parked && added <= 0, true});
    // Judged by the larger of the two: the resident set can grow less than
    // what was allocated when earlier scenarios left freed memory behind.
    const double memory_per_wait = std::max(per_wait, heap_per_wait);
    report.goal({std::to_string(waits) + " pending async waits: < 1 KiB each", num(memory_per_wait, 0) + " B",
                 parked && memory_per_wait < 1024, false});
    report.goal({"destroying the client cancels every pending wait", std::to_string(cancelled.load()),
                 cancelled.load() == waits, true});
  }

  static bool test_wait(const std::function<bool()>& condition, std::chrono::milliseconds timeout) {
    const auto deadline = Clock::now() + timeout;
    while (!condition()) {
      if (Clock::now() >= deadline) return false;
      std::this_thread::sleep_for(10ms);
    }
    return true;
  }

  std::string out_dir;
};

// ------------------------------------------------------------------ child modes

int child_waiter(const std::string& url, const std::string& contender, const std::string& name) {
  auto c = make_contender(contender, url);
  auto s = c->session();
  std::cout << "ready" << std::endl;
  std::string line;
  while (std::getline(std::cin, line)) {
    if (line == "quit") break;
    // "go NAME": wait for NAME ("go" alone: the name given at start).
    const std::string n = line.size() > 3 ? line.substr(3) : name;
    s->lock(n);
    const auto t1 = now_ns();
    s->unlock(n);
    std::cout << "t1 " << t1 << std::endl;
  }
  return 0;
}

// Waits on `name` in a loop for `millis` after "go" (lock, then unlock at
// once); prints the waits in ms on one line.
int child_hot_waiter(const std::string& url, const std::string& name, int millis) {
  DatabaseDistributedLock client(Options::from_url(url));
  client.lock(name);  // warm: row, statements, bell connection
  client.unlock(name);
  std::cout << "ready" << std::endl;
  std::string line;
  if (!std::getline(std::cin, line)) return 1;
  std::vector<double> waits;
  const auto end = Clock::now() + std::chrono::milliseconds(millis);
  while (Clock::now() < end) {
    const auto t0 = Clock::now();
    client.lock(name);
    waits.push_back(ms(Clock::now() - t0));
    client.unlock(name);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));  // as a service would, not hammering
  }
  std::cout << "waits";
  for (double w : waits) std::cout << " " << num(w);
  std::cout << std::endl;
  return 0;
}

// Loops lock+unlock of fair lock `name` on `threads` threads for `millis`
// after "go" on stdin; prints "ops N" (cycles).
int child_hot_fair(const std::string& url, const std::string& name, int threads, int millis) {
  DatabaseDistributedLock client(Options::from_url(url));
  client.get_fair_lock(name).lock();  // warm
  client.get_fair_lock(name).unlock();
  std::cout << "ready" << std::endl;
  std::string line;
  if (!std::getline(std::cin, line)) return 1;
  std::atomic<bool> stop{false};
  std::atomic<long> ops{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&] { ops += loop_fair(client, name, stop); });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(millis));
  stop = true;
  for (auto& th : pool) th.join();
  std::cout << "ops " << ops.load() << std::endl;
  return 0;
}

int child_throughput(const std::string& url, const std::string& contender, int threads, int millis,
                     const std::string& prefix) {
  auto c = make_contender(contender, url);
  std::vector<std::string> names;
  for (int t = 0; t < threads; ++t) names.push_back(prefix + std::to_string(t));
  c->prepare(names);
  std::vector<std::unique_ptr<Session>> sessions;
  for (int t = 0; t < threads; ++t) sessions.push_back(c->session());
  std::atomic<bool> stop{false};
  std::atomic<long> ops{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      long mine = 0;
      while (!stop) {
        sessions[t]->lock(names[t]);
        sessions[t]->unlock(names[t]);
        ++mine;
      }
      ops += mine;
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(millis));
  stop = true;
  for (auto& th : pool) th.join();
  std::cout << "ops " << static_cast<double>(ops.load()) * 1000.0 / millis << std::endl;
  return 0;
}

}  // namespace
}  // namespace dlock::bench

int main(int argc, char** argv) {
  using namespace dlock::bench;
  self_path = argv[0];
  std::vector<std::string> args(argv + 1, argv + argc);
  try {
    if (!args.empty() && args[0] == "--child-waiter" && args.size() == 4) return child_waiter(args[1], args[2], args[3]);
    if (!args.empty() && args[0] == "--child-hot-waiter" && args.size() == 4)
      return child_hot_waiter(args[1], args[2], std::stoi(args[3]));
    if (!args.empty() && args[0] == "--child-hot-fair" && args.size() == 5)
      return child_hot_fair(args[1], args[2], std::stoi(args[3]), std::stoi(args[4]));
    if (!args.empty() && args[0] == "--child-throughput" && args.size() == 6)
      return child_throughput(args[1], args[2], std::stoi(args[3]), std::stoi(args[4]), args[5]);
    std::string url, out_dir = "bench/results", only, cluster_url, tls_url;
    bool quick = false;
    for (std::size_t i = 0; i < args.size(); ++i) {
      if (args[i] == "--url" && i + 1 < args.size()) {
        url = args[++i];
      } else if (args[i] == "--out" && i + 1 < args.size()) {
        out_dir = args[++i];
      } else if (args[i] == "--quick") {
        quick = true;
      } else if (args[i] == "--only" && i + 1 < args.size()) {
        only = args[++i];
      } else if (args[i] == "--cluster-url" && i + 1 < args.size()) {
        cluster_url = args[++i];
      } else if (args[i] == "--tls-url" && i + 1 < args.size()) {
        tls_url = args[++i];
      } else {
        std::cerr << "usage: dlock_bench --url URL [--quick] [--out DIR] [--only SCENARIO,...] [--cluster-url URL] "
                     "[--tls-url URL]\n"
                     "scenarios: uncontended, breakdown, reentrant, throughput, handoff, hotlock, fairlock, election, multilock, metrics, fairness, starvation, wakeup, background, "
                     "memory, async, guarded, herd, tls (needs --tls-url: the TLS test server), cluster (needs --cluster-url: a node of a Galera "
                     "cluster)\n";
        return 2;
      }
    }
    if (url.empty()) {
      std::cerr << "dlock_bench: --url is required\n";
      return 2;
    }
    const auto started = Clock::now();
    Bench bench(url, quick);
    bench.out_dir = out_dir;
    const std::string server = bench.stats.scalar("SELECT VERSION()");
    const std::string durable = bench.stats.scalar("SELECT @@innodb_flush_log_at_trx_commit");
    std::ostringstream header;
    header << "Machine: " << std::thread::hardware_concurrency() << " cores; server " << server
           << " on loopback, innodb_flush_log_at_trx_commit=" << durable << "; mode " << (quick ? "quick" : "full")
           << ".";
    std::cout << "# dlock benchmark\n\n" << header.str() << "\n";
    const auto selected = [&](const char* scenario) {
      return only.empty() || ("," + only + ",").find(std::string(",") + scenario + ",") != std::string::npos;
    };
    if (selected("uncontended")) bench.uncontended();
    if (selected("breakdown")) bench.breakdown();
    if (selected("reentrant")) bench.reentrant();
    if (selected("throughput")) bench.throughput();
    if (selected("throughput")) bench.throughput_one_name();
    if (selected("handoff")) bench.handoff();
    if (selected("handoff")) bench.handoff_from_call();
    if (selected("hotlock")) bench.hot_lock();
    if (selected("fairlock")) bench.fair_lock();
    if (selected("election")) bench.election();
    if (selected("metrics")) bench.metrics_cost();
    if (selected("multilock")) bench.multi_lock();
    if (selected("fairness")) bench.semaphore_fairness();
    if (selected("starvation")) bench.rw_starvation();
    if (selected("wakeup")) bench.wake_designs();
    if (selected("background")) bench.background();
    if (selected("memory")) bench.memory();
    if (selected("async")) bench.async_waits();
    if (selected("tls") && !tls_url.empty()) bench.tls(tls_url);
    if (selected("guarded")) bench.guarded();
    if (selected("herd")) bench.herd();
    // Only when asked for: it needs a cluster beside the server.
    if (!cluster_url.empty() && ("," + only + ",").find(",cluster,") != std::string::npos) bench.cluster(cluster_url);
    else if (("," + only + ",").find(",cluster,") != std::string::npos) throw std::invalid_argument("--only cluster needs --cluster-url");

    bool exact_missed = false;
    std::vector<std::vector<std::string>> rows;
    std::string goals_json = "[";
    for (const auto& g : bench.report.goals()) {
      rows.push_back({g.what, g.measured, g.met ? "met" : "NOT MET"});
      goals_json += "{\"goal\": \"" + g.what + "\", \"measured\": \"" + g.measured + "\", \"met\": " +
                    (g.met ? "true" : "false") + "}, ";
      if (!g.met && g.exact) exact_missed = true;
    }
    bench.report.section("Goals");
    bench.report.table({"goal", "measured", "status"}, rows);
    bench.report.json("goals", goals_json.substr(0, goals_json.size() - 2) + "]");
    bench.report.json("machine", "\"" + header.str() + "\"");
    const double took = std::chrono::duration<double>(Clock::now() - started).count();
    std::cout << "\nTook " << num(took, 0) << " s.\n";
    std::ofstream(out_dir + "/latest.md") << "# dlock benchmark\n\n" << header.str() << "\n" << bench.report.markdown();
    std::ofstream(out_dir + "/latest.json") << bench.report.json_text();
    if (exact_missed) {
      std::cerr << "dlock_bench: a statement-count goal was missed\n";
      return 1;
    }
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "dlock_bench: " << e.what() << "\n";
    return 1;
  }
}
