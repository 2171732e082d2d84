// dlock_torture: orchestrator (workers + nemesis + checker) and worker.
//
//   dlock_torture --url URL --db-script scripts/db.sh --out DIR [--dlock PATH]
//                 [--quick] [--faults LIST] [--duration SECONDS]
//   dlock_torture --cluster scripts/cluster.sh [--placement one|several] --out DIR ...
//                 [--workers K] [--async-workers A] [--semaphore-workers S] [--rw-workers R]
//                 [--multi-workers M] [--fair-workers F] [--election-workers E]
//                 [--guarded-workers G] [--threads T] [--names N]
//   dlock_torture --worker URL MACHINE_ID LABEL CLIENTS HISTORY LOG THREADS NAMES POOL FENCED UNTIL_US ASYNC SEMAPHORE RW
//                 MULTI FAIR ELECTION GUARDED
//   dlock_torture --cli-worker URL DLOCK ID HISTORY PIDFILE NAMES FENCED UNTIL_US
//   dlock_torture --cli-step URL NAME OP HISTORY FENCED CLI_WORKER_PID
//
// Fault kinds: kill-holder, pause-holder, pause-db, kill-db, kill-conns,
// idle-timeout, foreign-lock, kill-dlock (injected one after another), and
// pool, shared-id (in force for the whole run).
//
// With --cluster (the Galera test bed of scripts/cluster.sh instead of one
// server), pause-db and kill-db give way to node faults: kill-node (kill -9
// a node, leave it dead past the cluster's eviction, restart it by IST),
// sst-node (the same, restarted by a full state transfer) and pause-node
// (SIGSTOP a node past the eviction; it rejoins by itself). They take the
// nodes in turn, so node 1, the one HAProxy sends to, dies too: the proxy's
// failover. kill-conns and idle-timeout act on every node, foreign-lock on
// one. --placement several (the default) spreads the workers over the proxy
// and multi-host URLs starting at each node (writers on several nodes at
// once); one gives every worker the multi-host URL starting at node 1 (one
// writer node while node 1 lives). With --dlock, a CLI
// workload (critical sections run by `dlock run`) runs beside the library
// workers; kill-dlock needs it. Of the library workers, --async-workers run
// the coroutine workload and --semaphore-workers the semaphore workload
// (permits of "sem", bound kSemaphorePermits, each working on its slot's
// resource with the slot's token), and --rw-workers the read-write workload
// (read-write lock "rw": writes on resource "w", reads recorded on "v"; no
// applied write may overlap an applied read), and --multi-workers the
// multi-lock workload (random sets of 2-8 of the names "m*" in random
// order, one MultiLock each, every name's resource worked on with its
// token; a set found partly held right after its acquire is a violation),
// and --fair-workers the fair-lock workload (fair locks "f0" and "f1",
// twice --threads threads per client, each grant's resource worked on with
// its token, each grant's hold id recorded; the queues are sampled, and a
// grant out of queue order is a violation: grant_order.hpp), and
// --election-workers the election workload (candidates in election "e0";
// each term's leader works on resource "e0" with its term, then resigns),
// and --guarded-workers the guarded workload (locks "g0" and "g1": each
// holder reads and writes its counter row in a transaction of its own on
// the lock table's database, runs the hold's guard_sql() last and commits,
// with no fence check anywhere; holders are paused past their lease between
// the write and the guard; the control drops the guard and must lose
// updates).
// Exit status 0 only if the checker found no
// violation and the control run (no fence guard, holders paused, fair
// queues reordered behind the library's back) lost updates and, with
// read-write workers, had writes overlapping reads and, with fair-lock
// workers, grants out of queue order.
#include <cppconn/prepared_statement.h>
#include <cppconn/resultset.h>
#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "child_process.hpp"
#include "sql/connection.hpp"
#include "dlock/options.hpp"
#include "torture.hpp"
#include "torture/grant_order.hpp"
#include "torture/herd_check.hpp"
#include "torture/loss_order.hpp"
#include "torture/partitions.hpp"

namespace dlock::torture {
namespace {

using namespace std::chrono_literals;

const std::vector<std::string> kAllFaults = {
    "kill-holder", "pause-holder", "pause-db",         "kill-db",      "kill-conns", "idle-timeout",
    "foreign-lock", "kill-dlock",  "partition-client", "drop-replies", "kill-node",  "sst-node",
    "pause-node",  "isolate-node", "pool",             "shared-id"};
// Faults in force for a whole run rather than injected one at a time.
bool is_configuration(const std::string& kind) { return kind == "pool" || kind == "shared-id"; }
// Faults of the single server (scripts/db.sh) and of a cluster node.
bool is_server_fault(const std::string& kind) { return kind == "pause-db" || kind == "kill-db"; }
bool is_node_fault(const std::string& kind) {
  return kind == "kill-node" || kind == "sst-node" || kind == "pause-node" || kind == "isolate-node";
}
// Faults that cut one worker process off (every connection of a library
// worker then goes through black-hole proxies of its own: partitions.hpp).
bool is_partition_fault(const std::string& kind) { return kind == "partition-client" || kind == "drop-replies"; }
constexpr int kClusterNodes = 3;
// How long a node fault keeps its node dead or stopped: past the cluster's
// eviction of a silent node (5-6.5 s on the test bed).
constexpr int kNodeDownMs = 9000;

struct Config {
  std::string url, db_script, out, self, dlock;
  // The cluster mode: scripts/cluster.sh, the URL of each node (index 0:
  // node 1) and of the proxy, and where the workers connect.
  std::string cluster_script;
  std::vector<std::string> node_urls;
  std::string proxy_url;
  std::string placement = "several";
  std::set<std::string> faults;
  int workers = 11, threads = 2, names = 3;
  int async_workers = 1;      // of `workers`, how many run the asynchronous (coroutine) workload
  int semaphore_workers = 1;  // of `workers`, how many run the semaphore workload
  int rw_workers = 1;         // of `workers`, how many run the read-write workload
  int multi_workers = 1;      // of `workers`, how many run the multi-lock workload
  int fair_workers = 2;       // of `workers`, how many run the fair-lock workload
  int election_workers = 1;   // of `workers`, how many run the election workload
  int guarded_workers = 1;    // of `workers`, how many run the guarded workload
  int herd_workers = 1;       // of `workers`, how many run the herd workload (kHerdClients clients each)
  int duration_s = 600;
  int fault_every_s = 12;
  bool quick = false;
};

struct FaultEvent {
  std::string kind;
  std::int64_t start_us = 0, end_us = 0;
  std::string detail;
};

std::string shell(const std::string& cmd) {
  std::string out;
  if (FILE* p = ::popen(cmd.c_str(), "r")) {
    char buf[256];
    while (std::fgets(buf, sizeof buf, p)) out += buf;
    ::pclose(p);
  }
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return out;
}

// "mysql://u:p@h1:p1,h2:p2/db" from node URLs "mysql://u:p@hN:pN/db",
// starting at node `first` (0-based) and going round.
std::string multi_host_url(const std::vector<std::string>& node_urls, std::size_t first) {
  const auto host_of = [](const std::string& url) {
    const auto at = url.find('@') + 1;
    return url.substr(at, url.find('/', at) - at);
  };
  const std::string& u = node_urls[first];
  const auto at = u.find('@') + 1;
  std::string out = u.substr(0, at);
  for (std::size_t i = 0; i < node_urls.size(); ++i) {
    if (i) out += ",";
    out += host_of(node_urls[(first + i) % node_urls.size()]);
  }
  return out + u.substr(u.find('/', at));
}

// The orchestrator's own connection; reopened after a server fault.
class Admin {
 public:
  explicit Admin(std::string url) : url_(std::move(url)) {}
  details::Connection& db() {
    if (!c_ || c_->broken()) c_ = details::Connection::open(details::ConnectionSettings::from(Options::from_url(url_)));
    return *c_;
  }
  void exec(const std::string& sql) {
    retrying([&] { db().execute_plain(sql); });
  }
  std::vector<std::vector<std::string>> rows(const std::string& sql, int columns) {
    std::vector<std::vector<std::string>> out;
    retrying([&] {
      out.clear();
      auto& ps = db().prepared(sql);
      std::unique_ptr<sql::ResultSet> rs(ps.executeQuery());
      while (rs->next()) {
        std::vector<std::string> row;
        for (int i = 1; i <= columns; ++i) row.push_back(rs->getString(static_cast<std::uint32_t>(i)));
        out.push_back(std::move(row));
      }
    });
    return out;
  }

 private:
  // The orchestrator's statements outlive server faults it injected itself
  // (a restart takes a few seconds): retry on a fresh connection for 10 s.
  template <typename Fn>
  void retrying(Fn&& fn) {
    for (int attempt = 0;; ++attempt) {
      try {
        fn();
        return;
      } catch (const std::exception&) {
        if (c_) c_->mark_broken();
        if (attempt >= 50) throw;
        std::this_thread::sleep_for(200ms);
      }
    }
  }

  std::string url_;
  std::unique_ptr<details::Connection> c_;
};

struct WorkerSlot {
  int index = 0;
  int incarnation = 0;
  bool cli = false;  // the CLI workload (dlock run), not a library worker
  std::unique_ptr<test::ChildProcess> process;
  std::string machine_id;  // unique per incarnation
  std::string label;       // its clients' Options::machine_id
  bool killed_by_nemesis = false;
  std::unique_ptr<WorkerProxies> proxies;  // with partition faults: its way to the servers, kept across incarnations
};

struct RunResult {
  long ok = 0, refused = 0, claim_refused = 0, failed = 0, unknown = 0, acquisitions = 0;
  long applied = 0, counter = 0;
  std::map<std::string, long> faults;
  std::map<std::string, double> worst_recovery_s;
  std::vector<std::string> node_faults;  // what each node fault did (cluster runs)
  std::vector<std::string> violations;
  long lost_updates = 0;
  long handoffs = 0;  // holds handed straight to a local waiter (workers alive at the end)
  long write_handoffs = 0;  // of them, write sides of "rw" (the read-write workers')
  long permit_handoffs = 0;  // of them, permits of "sem" (the semaphore workers')
  long multi_sets = 0;       // sets held by the multi-lock workers
  long multi_sections = 0;   // and the names' critical sections they ran
  long election_terms = 0;   // terms in which a leader of "e0" worked (an op WORKER:eTHREAD:SEQ)
  int most_permits = 0;  // applied semaphore sections overlapping at once, at most
  long lost_on_slots = 0;  // of lost_updates, on semaphore slots
  long lost_on_guarded = 0;  // of lost_updates, of the guarded workload ("g*")
  long guarded_committed = 0;  // increments of "g*" committed
  long herd_handoffs = 0;      // herd names taken again after a release while herd waiters waited
  long herd_prompt = 0;        // of them, within 100 ms of the release (a wake, not a poll)
  int most_readers = 0;    // applied read sections of "rw" overlapping at once, at most
  long reads = 0, writes = 0;  // applied read and write sections of "rw"
  long rw_overlaps = 0;        // applied writes overlapping applied reads (a violation each)
  long fair_grants = 0;        // grants of "f*" the fair workers recorded with their hold ids
  long queue_snapshots = 0;    // distinct snapshots of their queues with a waiter in it
  long grants_checked = 0;     // recorded grants whose hold a snapshot showed queued
  long order_violations = 0;   // grants out of queue order
  long queue_moves = 0;        // entries the control's queue shuffler moved to the front
  long loss_holds = 0;         // holds the loss-order check followed
  long loss_told = 0;          // of them, ended by a loss the holder's process was told of
  long loss_violations = 0;    // grants while an earlier holder still counted its hold live
};

class Run {
 public:
  Run(const Config& cfg, bool fenced, int seconds, std::set<std::string> faults, std::string tag)
      : cfg_(cfg), fenced_(fenced), seconds_(seconds), faults_(std::move(faults)), tag_(std::move(tag)),
        admin_(cfg.url) {}

  RunResult execute() {
    prepare_tables();
    until_us_ = now_us() + static_cast<std::int64_t>(seconds_) * 1'000'000;
    {
      std::lock_guard<std::mutex> g(m_);
      for (int i = 0; i < cfg_.workers; ++i) {
        slots_.push_back(std::make_unique<WorkerSlot>());
        slots_.back()->index = i;
        start(*slots_.back());
      }
      if (!cfg_.dlock.empty()) {
        slots_.push_back(std::make_unique<WorkerSlot>());
        slots_.back()->index = cfg_.workers;
        slots_.back()->cli = true;
        start(*slots_.back());
      }
    }
    std::thread nemesis([this] { nemesis_loop(); });
    std::thread sampler;
    if (cfg_.fair_workers > 0) sampler = std::thread([this] { watch_fair_queues(); });
    supervise();
    nemesis.join();
    if (sampler.joinable()) sampler.join();
    finish_workers();
    RunResult result = check();
    // Keep this run's audit trail for a post-mortem (the next run starts
    // from empty tables).
    admin_.exec("DROP TABLE IF EXISTS torture_audit_" + tag_);
    admin_.exec("RENAME TABLE torture_audit TO torture_audit_" + tag_);
    return result;
  }

 private:
  std::string history_path(int index) const { return cfg_.out + "/" + tag_ + "-w" + std::to_string(index) + ".history"; }
  std::string pid_path(int index) const { return cfg_.out + "/" + tag_ + "-w" + std::to_string(index) + ".dlock-pid"; }
  int slot_count() const { return cfg_.workers + (cfg_.dlock.empty() ? 0 : 1); }
  std::string cli_url() const {
    return cfg_.url + (cfg_.url.find('?') == std::string::npos ? "?" : "&") +
           "table=torture_lock&watchdog_timeout_ms=" + std::to_string(kWatchdogMs) +
           "&poll_interval_ms=" + std::to_string(kPollMs) + "&io_timeout_ms=2000&connect_timeout_ms=2000";
  }

  void prepare_tables() {
    admin_.exec("DROP TABLE IF EXISTS torture_lock, torture_resource, torture_audit");
    admin_.exec("CREATE TABLE torture_resource (name VARBINARY(64) PRIMARY KEY, counter BIGINT NOT NULL DEFAULT 0,"
                " last_fence BIGINT UNSIGNED NOT NULL DEFAULT 0) ENGINE=InnoDB");
    admin_.exec("CREATE TABLE torture_audit (id BIGINT AUTO_INCREMENT PRIMARY KEY, name VARBINARY(64) NOT NULL,"
                " fence BIGINT UNSIGNED NOT NULL, worker VARCHAR(64) NOT NULL, entry_time DATETIME(6) NOT NULL,"
                " exit_time DATETIME(6) NOT NULL, applied TINYINT NOT NULL, op VARCHAR(128) NOT NULL,"
                " seq BIGINT NOT NULL DEFAULT 0) ENGINE=InnoDB");
    for (int n = 0; n < cfg_.names; ++n)
      admin_.exec("INSERT INTO torture_resource (name) VALUES ('r" + std::to_string(n) + "')");
    // One resource per semaphore slot the bound allows: a permit working on
    // any other finds no row (and the checker reports its slot).
    for (int n = 0; n < kSemaphorePermits; ++n)
      admin_.exec("INSERT INTO torture_resource (name) VALUES ('s" + std::to_string(n) + "')");
    // The read-write workload: writes on "w", reads recorded on "v".
    admin_.exec("INSERT INTO torture_resource (name) VALUES ('w'), ('v')");
    // The multi-lock workload's names, and the fair-lock workload's.
    for (int n = 0; n < kMultiNames; ++n)
      admin_.exec("INSERT INTO torture_resource (name) VALUES ('m" + std::to_string(n) + "')");
    for (int n = 0; n < kFairNames; ++n)
      admin_.exec("INSERT INTO torture_resource (name) VALUES ('f" + std::to_string(n) + "')");
    admin_.exec("INSERT INTO torture_resource (name) VALUES ('" + std::string(kElectionName) + "')");
    for (int n = 0; n < kGuardedNames; ++n)
      admin_.exec("INSERT INTO torture_resource (name) VALUES ('g" + std::to_string(n) + "')");
    for (const char* name : kHerdNames) admin_.exec("INSERT INTO torture_resource (name) VALUES ('" + std::string(name) + "')");
    for (int i = 0; i < slot_count(); ++i) std::remove(history_path(i).c_str());
  }

  void start(WorkerSlot& s) {
    s.machine_id = (s.cli ? "c" : "w") + std::to_string(s.index) + "-" + std::to_string(++s.incarnation);
    s.killed_by_nemesis = false;
    if (s.cli) {
      s.label = "cli";
      s.process = std::make_unique<test::ChildProcess>(
          cfg_.self, std::vector<std::string>{"--cli-worker", cli_url(), cfg_.dlock, s.machine_id,
                                              history_path(s.index), pid_path(s.index), std::to_string(cfg_.names),
                                              fenced_ ? "1" : "0", std::to_string(until_us_)});
      return;
    }
    // shared-id: two workers share a label, and each runs two clients with
    // it; every one of those clients must still be an owner of its own.
    const bool shared = faults_.count("shared-id") != 0;
    s.label = shared ? "pair" + std::to_string(s.index / 2) : s.machine_id;
    if (!s.proxies && (faults_.count("partition-client") || faults_.count("drop-replies")))
      s.proxies = std::make_unique<WorkerProxies>(worker_url(s.index));
    const int pool = faults_.count("pool") ? std::max(1, cfg_.threads - 1) : cfg_.threads + 1;
    s.process = std::make_unique<test::ChildProcess>(
        cfg_.self, std::vector<std::string>{"--worker", s.proxies ? s.proxies->url() : worker_url(s.index), s.machine_id,
                                            s.label, runs_herd(s.index) ? std::to_string(kHerdClients) : shared ? "2" : "1",
                                            history_path(s.index),
                                            cfg_.out + "/" + tag_ + "-w" + std::to_string(s.index) + ".log",
                                            std::to_string(cfg_.threads), std::to_string(cfg_.names),
                                            std::to_string(pool), fenced_ ? "1" : "0", std::to_string(until_us_),
                                            s.index >= cfg_.workers - cfg_.async_workers ? "1" : "0",
                                            runs_semaphore(s.index) ? "1" : "0", runs_rw(s.index) ? "1" : "0",
                                            runs_multi(s.index) ? "1" : "0", runs_fair(s.index) ? "1" : "0",
                                            runs_election(s.index) ? "1" : "0", runs_guarded(s.index) ? "1" : "0",
                                            runs_herd(s.index) ? "1" : "0"});
  }

  // Where library worker `index` connects: the run's URL on one server; on a
  // cluster, with placement "several", in turn the proxy and multi-host URLs
  // starting at node 1, 2 and 3; with "one", the multi-host URL from node 1.
  std::string worker_url(int index) const {
    if (cfg_.cluster_script.empty() || cfg_.placement == "one") return cfg_.url;
    const auto turn = static_cast<std::size_t>(index) % (cfg_.node_urls.size() + 1);
    return turn == 0 ? cfg_.proxy_url : multi_host_url(cfg_.node_urls, turn - 1);
  }

  // The herd workers come right before the guarded ones.
  bool runs_herd(int index) const {
    const int first = cfg_.workers - cfg_.async_workers - cfg_.semaphore_workers - cfg_.rw_workers -
                      cfg_.multi_workers - cfg_.fair_workers - cfg_.election_workers - cfg_.guarded_workers -
                      cfg_.herd_workers;
    return index >= first && index < first + cfg_.herd_workers;
  }

  // The guarded workers come right before the election ones.
  bool runs_guarded(int index) const {
    const int first = cfg_.workers - cfg_.async_workers - cfg_.semaphore_workers - cfg_.rw_workers -
                      cfg_.multi_workers - cfg_.fair_workers - cfg_.election_workers - cfg_.guarded_workers;
    return index >= first && index < first + cfg_.guarded_workers;
  }

  // The election workers come right before the fair-lock ones.
  bool runs_election(int index) const {
    const int first = cfg_.workers - cfg_.async_workers - cfg_.semaphore_workers - cfg_.rw_workers -
                      cfg_.multi_workers - cfg_.fair_workers - cfg_.election_workers;
    return index >= first && index < first + cfg_.election_workers;
  }

  // The fair-lock workers come right before the multi-lock ones.
  bool runs_fair(int index) const {
    const int first = cfg_.workers - cfg_.async_workers - cfg_.semaphore_workers - cfg_.rw_workers -
                      cfg_.multi_workers - cfg_.fair_workers;
    return index >= first && index < first + cfg_.fair_workers;
  }

  // The multi-lock workers come right before the read-write ones.
  bool runs_multi(int index) const {
    const int first =
        cfg_.workers - cfg_.async_workers - cfg_.semaphore_workers - cfg_.rw_workers - cfg_.multi_workers;
    return index >= first && index < first + cfg_.multi_workers;
  }

  // The read-write workers come right before the semaphore ones.
  bool runs_rw(int index) const {
    const int first = cfg_.workers - cfg_.async_workers - cfg_.semaphore_workers - cfg_.rw_workers;
    return index >= first && index < first + cfg_.rw_workers;
  }

  // The semaphore workers come right before the asynchronous ones.
  bool runs_semaphore(int index) const {
    const int first = cfg_.workers - cfg_.async_workers - cfg_.semaphore_workers;
    return index >= first && index < cfg_.workers - cfg_.async_workers;
  }

  // Restarts workers the nemesis killed; anything else that ends early is
  // a crash.
  void supervise() {
    while (now_us() < until_us_) {
      {
        std::lock_guard<std::mutex> g(m_);
        for (auto& s : slots_) {
          if (!s->process) continue;
          const auto status = s->process->wait(0ms);
          if (!status) continue;
          if (s->killed_by_nemesis) {
            start(*s);
          } else if (now_us() < until_us_ - 1'000'000) {
            violation("worker " + s->machine_id + " ended early (wait status " + std::to_string(*status) + ")");
            s->process.reset();
          }
        }
      }
      std::this_thread::sleep_for(100ms);
    }
  }

  void finish_workers() {
    for (auto& s : slots_) {
      if (!s->process) continue;
      ::kill(s->process->pid(), SIGCONT);  // never leave one stopped
      if (!s->cli) {
        if (const auto handed = s->process->wait_for_line("handoffs ", 30s)) {
          handoffs_ += std::stol(handed->substr(9));
          // A read-write worker hands over nothing but write sides.
          if (runs_rw(s->index)) write_handoffs_ += std::stol(handed->substr(9));
          // A semaphore worker, nothing but permits.
          if (runs_semaphore(s->index)) permit_handoffs_ += std::stol(handed->substr(9));
        }
      }
      const auto line = s->cli ? std::optional<std::string>() : s->process->wait_for_line("threads ", 30s);
      const auto status = s->process->wait(10s);
      if (!status) {
        violation("worker " + s->machine_id + " hung past the end of the run");
        s->process->kill(SIGKILL);
        continue;
      }
      if (s->killed_by_nemesis) continue;
      if (!WIFEXITED(*status) || WEXITSTATUS(*status) != 0)
        violation("worker " + s->machine_id + " crashed (wait status " + std::to_string(*status) + ")");
      else if (!s->cli && (!line || *line != "threads left 0"))
        violation("worker " + s->machine_id + " did not end cleanly: " + line.value_or("no thread report"));
    }
  }

  // The fair queues, seen by a connection of their own every few
  // milliseconds (grant_order.hpp): each snapshot is one consistent read of
  // a name's rows, the head's fence and the live entries in queue order.
  // In the control run the same thread also breaks the order the checker
  // checks: now and then it moves a name's last live entry to the front of
  // its queue, behind the library's back, so the next grants go out of the
  // order an earlier snapshot saw.
  void watch_fair_queues() {
    std::unique_ptr<details::Connection> db;
    std::map<std::string, std::vector<std::uint64_t>> last;
    const auto settings = details::ConnectionSettings::from(Options::from_url(cfg_.url));
    std::int64_t next_move = 0;
    while (now_us() < until_us_) {
      try {
        if (!db || db->broken()) db = details::Connection::open(settings);
        for (int n = 0; n < kFairNames; ++n) {
          const std::string name = "f" + std::to_string(n);
          auto& read = db->prepared(
              "SELECT slot, fence, hold_id, intent_expire > NOW(6) FROM torture_lock WHERE kind = 5 AND lock_name = ?"
              " ORDER BY slot > 0, acquired_at, slot");
          read.setString(1, name);
          std::unique_ptr<sql::ResultSet> rs(read.executeQuery());
          QueueSnapshot snap{name, 0, {}};
          bool head = false;
          while (rs->next()) {
            if (rs->getUInt64(1) == 0) {
              head = true;
              snap.head_fence = rs->getUInt64(2);
            } else if (rs->getInt(4) == 1) {
              snap.queue.push_back(rs->getUInt64(3));
            }
          }
          if (!head || snap.queue.empty() || last[name] == snap.queue) continue;
          last[name] = snap.queue;
          std::lock_guard<std::mutex> g(snapshots_m_);
          snapshots_.push_back(std::move(snap));
        }
        if (!fenced_ && now_us() >= next_move) {
          next_move = now_us() + 20'000;
          for (int n = 0; n < kFairNames; ++n) {
            auto& move = db->prepared(
                "UPDATE torture_lock SET acquired_at = '1970-01-03 00:00:00' WHERE kind = 5 AND lock_name = ? AND"
                " slot > 0 AND intent_expire > NOW(6) AND acquired_at > '1970-01-03 00:00:00' ORDER BY acquired_at"
                " DESC, slot DESC LIMIT 1");
            move.setString(1, "f" + std::to_string(n));
            queue_moves_ += move.executeUpdate();
          }
        }
      } catch (const std::exception&) {
        if (db) db->mark_broken();
        std::this_thread::sleep_for(100ms);  // a server fault: look again soon
      }
      std::this_thread::sleep_for(3ms);
    }
  }

  void violation(const std::string& what) {
    std::lock_guard<std::mutex> g(violations_m_);
    violations_.push_back(what);
  }

  // ------------------------------------------------------------- nemesis

  // A library worker holding a lock now (with shared-id, one of the two
  // workers with the holder's label).
  int holder_faults_ = 0;  // holder faults injected so far (the nemesis thread)
  // A lock, permit or read-write lock holder: any live hold; with
  // `leader`, only the election's leader.
  pid_t holder_pid(std::string* machine, bool leader = false) {
    const std::vector<std::vector<std::string>> rows = admin_.rows(
        std::string("SELECT machine_id FROM torture_lock WHERE state > 0 AND expire_time > NOW(6)") +
            (leader ? " AND kind = 6" : "") + " ORDER BY RAND() LIMIT 1",
        1);
    if (rows.empty()) return 0;
    std::lock_guard<std::mutex> g(m_);
    std::vector<WorkerSlot*> candidates;
    for (auto& s : slots_)
      if (s->process && !s->cli && s->label == rows[0][0]) candidates.push_back(s.get());
    if (candidates.empty()) return 0;
    WorkerSlot* s = candidates[static_cast<std::size_t>(now_us()) % candidates.size()];
    *machine = s->machine_id;
    return s->process->pid();
  }

  // The dlock process the CLI workload runs now (a child of a CLI worker),
  // 0 if none.
  pid_t dlock_pid() {
    std::vector<std::pair<int, pid_t>> workers;
    {
      std::lock_guard<std::mutex> g(m_);
      for (auto& s : slots_)
        if (s->cli && s->process) workers.emplace_back(s->index, s->process->pid());
    }
    for (const auto& [index, worker] : workers) {
      std::ifstream in(pid_path(index));
      long pid = 0;
      if (!(in >> pid) || pid <= 0) continue;
      std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
      std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
      const auto close = text.rfind(')');
      if (close == std::string::npos) continue;
      std::istringstream rest(text.substr(close + 2));
      std::string state;
      long parent = 0;
      if (rest >> state >> parent && state != "Z" && parent == worker) return static_cast<pid_t>(pid);
    }
    return 0;
  }

  // Holds the lock row of a random name in a transaction of its own, past
  // the workers' leases, then rolls back.
  void lock_row_for_a_while(FaultEvent& e) {
    // A lock's row, or every row of the semaphore or of the read-write
    // lock (both sides): the watchdog must renew every other hold around it.
    const std::size_t pick = static_cast<std::size_t>(now_us());
    std::string name = "r" + std::to_string(pick % static_cast<std::size_t>(cfg_.names));
    int kind = 1;
    if (pick % 5 == 3) {
      name = "sem";
      kind = 2;
    } else if (pick % 5 == 4) {
      name = "rw";
      kind = 3;
    }
    e.detail = name;
    try {
      std::string url = cfg_.url;
      if (!cfg_.node_urls.empty()) {
        const std::size_t node = static_cast<std::size_t>(now_us() / 1000) % cfg_.node_urls.size();
        url = cfg_.node_urls[node];
        e.detail += " on node " + std::to_string(node + 1);
      }
      auto c = details::Connection::open(details::ConnectionSettings::from(Options::from_url(url)));
      c->execute_plain("START TRANSACTION");
      auto& ps = c->prepared("SELECT lock_name FROM torture_lock WHERE kind IN (?, ?) AND lock_name = ? FOR UPDATE");
      ps.setInt(1, kind);
      ps.setInt(2, kind == 3 ? 4 : kind);
      ps.setString(3, name);
      std::unique_ptr<sql::ResultSet>(ps.executeQuery());
      std::this_thread::sleep_for(std::chrono::milliseconds(kLeaseMs + 1000));
      c->execute_plain("ROLLBACK");
    } catch (const std::exception& ex) {
      e.detail += std::string(" (") + ex.what() + ")";
    }
  }

  // Cuts one library worker off (preferably one holding something) for a
  // random 1-10 s, then heals: partition-client forwards nothing either way,
  // drop-replies lets requests through and throws the answers away.
  void partition_worker(FaultEvent& e) {
    WorkerSlot* victim = nullptr;
    std::string machine;
    for (int i = 0; i < 25 && victim == nullptr; ++i) {
      const pid_t pid = holder_pid(&machine);
      std::lock_guard<std::mutex> g(m_);
      for (auto& s : slots_)
        if (pid != 0 && s->proxies && s->process && s->process->pid() == pid) victim = s.get();
      if (victim == nullptr) std::this_thread::sleep_for(20ms);
    }
    if (victim == nullptr) {
      std::lock_guard<std::mutex> g(m_);
      std::vector<WorkerSlot*> any;
      for (auto& s : slots_)
        if (s->proxies) any.push_back(s.get());
      if (any.empty()) return;
      victim = any[static_cast<std::size_t>(now_us()) % any.size()];
    }
    const int cut_ms = 1000 + static_cast<int>(now_us() % 9001);
    e.start_us = now_us();
    e.detail = victim->machine_id + " for " + std::to_string(cut_ms) + " ms";
    if (e.kind == "drop-replies") {
      victim->proxies->drop_replies();
    } else {
      victim->proxies->blackhole();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(cut_ms));
    victim->proxies->heal();
  }

  void mark_killed(pid_t pid) {
    std::lock_guard<std::mutex> g(m_);
    for (auto& s : slots_)
      if (s->process && s->process->pid() == pid) s->killed_by_nemesis = true;
  }

  void kill_client_connections() {
    if (!cfg_.node_urls.empty()) {
      for_each_node([this](details::Connection& c) { kill_client_connections_on(c); });
      return;
    }
    const auto ids = admin_.rows(
        "SELECT ID FROM information_schema.PROCESSLIST WHERE ID <> CONNECTION_ID() AND USER = SUBSTRING_INDEX(USER(), "
        "'@', 1) AND DB = DATABASE()",
        1);
    for (const auto& id : ids) {
      try {
        admin_.db().execute_plain("KILL " + id[0]);
      } catch (const std::exception&) {  // already gone
      }
    }
  }

  static void kill_client_connections_on(details::Connection& c) {
    std::vector<std::string> ids;
    {
      auto& ps = c.prepared(
          "SELECT ID FROM information_schema.PROCESSLIST WHERE ID <> CONNECTION_ID() AND USER = SUBSTRING_INDEX(USER(), "
          "'@', 1) AND DB = DATABASE()");
      std::unique_ptr<sql::ResultSet> rs(ps.executeQuery());
      while (rs->next()) ids.push_back(rs->getString(1));
    }
    for (const auto& id : ids) {
      try {
        c.execute_plain("KILL " + id);
      } catch (const std::exception&) {  // already gone
      }
    }
  }

  // Runs `fn` on a fresh connection to each cluster node (a node that is
  // down is skipped: server-wide settings and sessions die with it).
  template <typename Fn>
  void for_each_node(Fn&& fn) {
    for (const auto& url : cfg_.node_urls) {
      try {
        auto c = details::Connection::open(details::ConnectionSettings::from(Options::from_url(url)));
        fn(*c);
      } catch (const std::exception&) {
      }
    }
  }

  // Every node up and Synced in a three-node cluster (a node fault starts
  // from a whole cluster); restarts a node that is not, if need be.
  void wait_cluster_whole() {
    const std::string script = "'" + cfg_.cluster_script + "'";
    for (int i = 0; i < 120; ++i) {
      if (std::system((script + " status >/dev/null 2>&1").c_str()) == 0) return;
      std::this_thread::sleep_for(500ms);
    }
    for (int n = 1; n <= kClusterNodes; ++n) shell(script + " restart " + std::to_string(n) + " >/dev/null 2>&1");
  }

  // Cuts node `node` off from the other two by dropping its traffic
  // (scripts/cluster.sh isolate: no process is touched) for kNodeDownMs. The
  // minority node must stop serving: a connection to it is refused (not
  // ready) while it is cut off; clients that wrote through it fail over.
  void isolate_node(FaultEvent& e, int node) {
    const std::string script = "'" + cfg_.cluster_script + "'";
    const std::string n = std::to_string(node);
    shell(script + " isolate " + n);
    const auto cut = now_us();
    std::int64_t refused_after = -1;
    while (now_us() - cut < static_cast<std::int64_t>(kNodeDownMs) * 1000) {
      if (refused_after < 0) {
        try {
          details::Connection::open(
              details::ConnectionSettings::from(Options::from_url(cfg_.node_urls[static_cast<std::size_t>(node - 1)])));
        } catch (const BackendError& ex) {
          if (ex.code() == details::mysql_error::kWsrepNotReady) refused_after = now_us() - cut;
        }
      }
      std::this_thread::sleep_for(200ms);
    }
    shell(script + " heal");
    const auto healed = now_us();
    for (int i = 0; i < 120; ++i) {
      if (std::system((script + " status >/dev/null 2>&1").c_str()) == 0) break;
      std::this_thread::sleep_for(500ms);
    }
    const auto secs = [](std::int64_t us) { return std::to_string(us / 100'000 / 10.0).substr(0, 4) + " s"; };
    e.detail = "node " + n + " cut off " + std::to_string(kNodeDownMs / 1000) + " s, " +
               (refused_after < 0 ? std::string("never stopped serving") : "not ready after " + secs(refused_after)) +
               ", whole again " + secs(now_us() - healed) + " after the heal";
    if (refused_after < 0) violation("isolated node " + n + " kept serving clients for " + secs(now_us() - cut));
  }

  void node_fault(FaultEvent& e) {
    const std::string script = "'" + cfg_.cluster_script + "'";
    wait_cluster_whole();
    const int node = next_node_[e.kind]++ % kClusterNodes + 1;
    const std::string n = std::to_string(node);
    e.start_us = now_us();
    const auto since = [&](std::int64_t t) { return std::to_string((now_us() - t) / 100'000 / 10.0).substr(0, 4) + " s"; };
    if (e.kind == "isolate-node") {
      isolate_node(e, node);
    } else if (e.kind == "pause-node") {
      shell(script + " pause " + n);
      std::this_thread::sleep_for(std::chrono::milliseconds(kNodeDownMs));
      shell(script + " resume " + n);
      const auto resumed = now_us();
      for (int i = 0; i < 120; ++i) {
        if (std::system((script + " status >/dev/null 2>&1").c_str()) == 0) break;
        std::this_thread::sleep_for(500ms);
      }
      e.detail = "node " + n + " stopped " + std::to_string(kNodeDownMs / 1000) + " s, whole again " + since(resumed) +
                 " after SIGCONT";
    } else {
      shell(script + " kill " + n);
      std::this_thread::sleep_for(std::chrono::milliseconds(kNodeDownMs));
      const auto restarted = now_us();
      shell(script + " restart " + n + (e.kind == "sst-node" ? " --sst" : "") + " >/dev/null 2>&1");
      e.detail = "node " + n + " dead " + std::to_string(kNodeDownMs / 1000) + " s, rejoined by " +
                 (e.kind == "sst-node" ? "SST" : "IST") + " in " + since(restarted);
    }
    wait_cluster_whole();
  }

  FaultEvent inject(const std::string& kind) {
    FaultEvent e{kind, now_us(), 0, ""};
    if (kind == "kill-holder" || kind == "pause-holder") {
      std::string machine;
      pid_t pid = 0;
      // Every third holder fault goes to the election's leader if one shows
      // within a second (a leader holds for milliseconds per term, so a
      // random hold would seldom be its).
      const bool leader = cfg_.election_workers > 0 && ++holder_faults_ % 3 == 0;
      bool on_leader = false;
      for (int i = 0; i < 50 && pid == 0; ++i) {
        on_leader = leader && i < 40;
        pid = holder_pid(&machine, on_leader);
        if (pid == 0) std::this_thread::sleep_for(20ms);
      }
      if (pid == 0) return {kind, 0, 0, "no holder found"};
      e.start_us = now_us();
      e.detail = machine + (on_leader ? " (the election's leader)" : "");
      if (kind == "kill-holder") {
        mark_killed(pid);
        ::kill(pid, SIGKILL);
      } else {
        ::kill(pid, SIGSTOP);
        std::this_thread::sleep_for(std::chrono::milliseconds(kLeaseMs + 1000));
        ::kill(pid, SIGCONT);
      }
    } else if (is_partition_fault(kind)) {
      partition_worker(e);
    } else if (is_node_fault(kind)) {
      node_fault(e);
    } else if (kind == "pause-db") {
      const std::string pid = shell("'" + cfg_.db_script + "' pid");
      ::kill(static_cast<pid_t>(std::stol(pid)), SIGSTOP);
      std::this_thread::sleep_for(std::chrono::milliseconds(kLeaseMs + 500));
      ::kill(static_cast<pid_t>(std::stol(pid)), SIGCONT);
    } else if (kind == "kill-db") {
      shell("'" + cfg_.db_script + "' kill >/dev/null 2>&1; '" + cfg_.db_script + "' start >/dev/null 2>&1");
    } else if (kind == "kill-dlock") {
      pid_t pid = 0;
      for (int i = 0; i < 100 && pid == 0; ++i) {
        pid = dlock_pid();
        if (pid == 0) std::this_thread::sleep_for(20ms);
      }
      if (pid == 0) return {kind, 0, 0, "no dlock process found"};
      e.start_us = now_us();
      e.detail = "pid " + std::to_string(pid);
      ::kill(pid, SIGKILL);  // dlock alone: its command must not survive it
    } else if (kind == "foreign-lock") {
      lock_row_for_a_while(e);
    } else if (kind == "kill-conns") {
      kill_client_connections();  // the watchdogs' connections among them
    } else if (kind == "idle-timeout") {
      // A server-wide setting: on a cluster, each node's own.
      const auto set_wait_timeout = [this](const std::string& seconds) {
        const std::string sql = "SET GLOBAL wait_timeout = " + seconds;
        if (cfg_.node_urls.empty()) admin_.exec(sql);
        else for_each_node([&](details::Connection& c) { c.execute_plain(sql); });
      };
      set_wait_timeout("2");
      kill_client_connections();  // reconnects get the 2 s timeout
      std::this_thread::sleep_for(6s);
      set_wait_timeout("28800");
    }
    e.end_us = now_us();
    return e;
  }

  void nemesis_loop() {
    std::vector<std::string> kinds;
    for (const auto& k : kAllFaults)
      if (faults_.count(k) && !is_configuration(k) && (k != "kill-dlock" || !cfg_.dlock.empty())) kinds.push_back(k);
    std::size_t next = 0;
    std::int64_t at = now_us() + 4'000'000;
    while (!kinds.empty()) {
      while (now_us() < at) std::this_thread::sleep_for(50ms);
      // Leave room for the fault and its recovery before the run ends (a
      // node fault keeps its node down 9 s, and the node needs up to 15 s to
      // rejoin).
      const std::string& kind = kinds[next % kinds.size()];
      if (now_us() + (is_node_fault(kind) ? 40'000'000 : 12'000'000) > until_us_) break;
      FaultEvent e = inject(kind);
      ++next;
      if (e.start_us != 0) {
        std::lock_guard<std::mutex> g(m_);
        events_.push_back(e);
      }
      at = now_us() + static_cast<std::int64_t>(cfg_.fault_every_s) * 1'000'000 - (e.end_us - e.start_us);
    }
  }

  // ------------------------------------------------------------- checker

  RunResult check() {
    RunResult r;
    r.violations = violations_;
    std::map<std::string, std::vector<std::int64_t>> acquired;  // name -> times
    std::map<std::string, std::string> outcome;                 // op -> last word
    std::vector<RecordedGrant> grants;                          // of the fair workers
    std::vector<HoldEvent> hold_events;                         // for the loss-order check
    HerdHistory herd;                                           // for the herd check
    for (int i = 0; i < slot_count(); ++i) {
      std::ifstream in(history_path(i));
      std::string line;
      while (std::getline(in, line)) {
        HoldEvent hold_event;
        if (parse_hold_event(line, hold_event)) {
          if (hold_event.type == HoldEvent::Type::kLetGo) herd.let_go(hold_event.name, hold_event.at_us);
          hold_events.push_back(std::move(hold_event));
          continue;
        }
        std::istringstream ls(line);
        std::string word, a, b;
        ls >> word >> a >> b;
        if (word == "herdwait") {
          std::string end;
          ls >> end;
          herd.waited(a, std::stoll(b), std::stoll(end));
          continue;
        }
        if (word == "acq") herd.acquired(a, std::stoll(b));
        if (word == "acq") {
          acquired[a].push_back(std::stoll(b));
          ++r.acquisitions;
        } else if (word == "grant") {
          std::string hold;
          ls >> hold;
          grants.push_back({a, std::stoull(b), std::stoull(hold)});
        } else if (word == "begin") {
          outcome.emplace(a, "begin");
        } else if (word == "crash") {
          r.violations.push_back("an asynchronous worker's coroutine ended with an exception: " + line);
        } else if (word == "partial") {
          r.violations.push_back("a multi-lock returned without holding every name of its set (" + a + ": " + b +
                                 " held)");
        } else if (word == "orphan") {
          r.violations.push_back("a command run by dlock outlived its dlock process (" + a + ")");
        } else {
          outcome[a] = word;
        }
      }
    }
    std::set<std::string> sets;  // a multi-lock section's op is WORKER:mTHREAD:SEQ:NAME
    for (const auto& [op, word] : outcome) {
      const auto thread = op.find(":m");
      if (thread != std::string::npos && std::count(op.begin(), op.end(), ':') == 3) {
        sets.insert(op.substr(0, op.rfind(':')));
        ++r.multi_sections;
      }
    }
    r.multi_sets = static_cast<long>(sets.size());
    for (const auto& [op, word] : outcome)
      if (op.find(":e") != std::string::npos && std::count(op.begin(), op.end(), ':') == 2) ++r.election_terms;
    for (const auto& [op, word] : outcome) {
      if (word == "ok") ++r.ok;
      else if (word == "refused") ++r.refused;
      else if (word == "claimrefused") ++r.claim_refused;
      else if (word == "failed") ++r.failed;
      else ++r.unknown;  // "unknown", or begun and never finished (killed)
    }
    r.handoffs = handoffs_;
    r.write_handoffs = write_handoffs_;
    r.permit_handoffs = permit_handoffs_;
    for (const auto& e : events_) {
      ++r.faults[e.kind];
      if (e.detail.find("(the election's leader)") != std::string::npos) ++r.faults[e.kind + " of the election's leader"];
    }
    for (const auto& k : faults_)
      if (is_configuration(k)) r.faults[k] = 1;

    // The fair locks: every grant in queue order (grant_order.hpp).
    {
      std::lock_guard<std::mutex> g(snapshots_m_);
      const GrantOrderResult order = check_grant_order(snapshots_, grants);
      r.fair_grants = static_cast<long>(grants.size());
      r.queue_snapshots = static_cast<long>(snapshots_.size());
      r.grants_checked = order.holds_checked;
      r.order_violations = order.violations;
      r.queue_moves = queue_moves_;
      for (const auto& v : order.examples) r.violations.push_back("grant out of queue order: " + v);
      if (order.violations > static_cast<long>(order.examples.size()))
        r.violations.push_back(std::to_string(order.violations - static_cast<long>(order.examples.size())) +
                               " more grants out of queue order");
    }

    // Herds: no herd name left free for long while a herd waiter waited,
    // but for faults that stall the server or cut clients off.
    {
      std::vector<std::pair<std::int64_t, std::int64_t>> excused;
      for (const auto& e : events_) {
        if (e.kind == "pause-holder" || e.kind == "kill-holder" || e.kind == "kill-conns" || e.kind == "kill-dlock")
          continue;
        excused.emplace_back(e.start_us, e.end_us);
      }
      const HerdCheck checked = herd.check(kHerdStuckMs * 1000, excused);
      r.herd_handoffs = checked.handoffs;
      r.herd_prompt = checked.prompt;
      for (const auto& v : checked.stuck) r.violations.push_back("lost wake: " + v);
    }

    // Losses told before the next grant (loss_order.hpp). A process stopped
    // (pause-holder) or killed (kill-holder) could not be told: grants while
    // it could not run are excused.
    {
      std::vector<Stopped> stopped;
      for (const auto& e : events_) {
        if (e.kind != "pause-holder" && e.kind != "kill-holder") continue;
        const std::string process = e.detail.substr(0, e.detail.find(' '));
        stopped.push_back({process, e.start_us,
                           e.kind == "kill-holder" ? std::numeric_limits<std::int64_t>::max() : e.end_us});
      }
      const LossOrderResult order = check_loss_order(std::move(hold_events), stopped);
      r.loss_holds = order.holds;
      r.loss_told = order.told_lost;
      r.loss_violations = order.violations;
      for (const auto& v : order.examples) r.violations.push_back("told too late: " + v);
      if (order.violations > static_cast<long>(order.examples.size()))
        r.violations.push_back(std::to_string(order.violations - static_cast<long>(order.examples.size())) +
                               " more grants while an earlier holder still counted its hold live");
    }

    // Counter vs increments: the audit row commits with the write, so the
    // applied rows are exactly the writes that took effect.
    const auto counters = admin_.rows(
        "SELECT r.name, r.counter, (SELECT COUNT(*) FROM torture_audit a WHERE a.applied = 1 AND a.name = r.name)"
        " FROM torture_resource r",
        3);
    for (const auto& row : counters) {
      const long counter = std::stol(row[1]);
      const long applied = std::stol(row[2]);
      r.counter += counter;
      r.applied += applied;
      if (!row[0].empty() && row[0][0] == 'g') r.guarded_committed += counter;
      if (counter != applied) {
        r.lost_updates += applied - counter;
        if (!row[0].empty() && row[0][0] == 's') r.lost_on_slots += applied - counter;
        if (!row[0].empty() && row[0][0] == 'g') r.lost_on_guarded += applied - counter;
        r.violations.push_back("lost updates on " + row[0] + ": " + std::to_string(applied) + " increments applied, counter " +
                               std::to_string(counter));
      }
    }
    if (r.applied < r.ok || r.applied > r.ok + r.unknown)
      r.violations.push_back("acknowledged increments " + std::to_string(r.ok) + " (+" + std::to_string(r.unknown) +
                             " unknown) do not explain " + std::to_string(r.applied) + " applied");

    // Fences: unique per name; strictly increasing in commit order among
    // applied writes; overlapping critical sections only when the later one
    // has the higher fence and the earlier one's write was refused.
    const auto audit = admin_.rows(
        "SELECT name, fence, applied, UNIX_TIMESTAMP(entry_time) * 1000000, UNIX_TIMESTAMP(exit_time) * 1000000, op,"
        " seq FROM torture_audit ORDER BY id",
        7);
    struct Row {
      std::uint64_t fence;
      bool applied;
      double entry, exit;
      std::string op;
      std::int64_t seq;  // the counter the write left: commit order among applied writes of a name
    };
    std::map<std::string, std::vector<Row>> by_name;
    for (const auto& a : audit)
      by_name[a[0]].push_back({std::stoull(a[1]), a[2] == "1", std::stod(a[3]), std::stod(a[4]), a[5], std::stoll(a[6])});
    for (auto& [name, rows] : by_name) {
      if (name == "v") continue;  // reads share tokens and overlap; checked below
      if (!name.empty() && name[0] == 'g') continue;  // the guarded workload has no fence: its lost updates tell
      std::set<std::uint64_t> seen;
      for (const auto& row : rows)
        if (!seen.insert(row.fence).second)
          r.violations.push_back("fence " + std::to_string(row.fence) + " of " + name + " granted twice");
      // Commit order among applied writes: the counter each one left (a
      // stable sort: equal values, lost updates reported above, keep the
      // audit order).
      std::vector<const Row*> applied;
      for (const auto& row : rows)
        if (row.applied) applied.push_back(&row);
      std::stable_sort(applied.begin(), applied.end(), [](const Row* x, const Row* y) { return x->seq < y->seq; });
      std::uint64_t last_applied = 0;
      for (const Row* row : applied) {
        if (row->fence <= last_applied)
          r.violations.push_back("fence " + std::to_string(row->fence) + " of " + name + " committed after fence " +
                                 std::to_string(last_applied));
        last_applied = row->fence;
      }
      // Of two overlapping sections, the one granted first (lower fence)
      // must have been refused: a stale holder may still be running, even
      // enter late, but its write must not land.
      std::sort(rows.begin(), rows.end(), [](const Row& x, const Row& y) { return x.entry < y.entry; });
      for (std::size_t j = 0; j < rows.size(); ++j) {
        for (std::size_t i = 0; i < j; ++i) {
          if (rows[i].exit <= rows[j].entry) continue;
          const Row& older = rows[i].fence < rows[j].fence ? rows[i] : rows[j];
          if (rows[i].fence == rows[j].fence || older.applied)
            r.violations.push_back("critical sections overlap on " + name + ": " + rows[i].op + " (fence " +
                                   std::to_string(rows[i].fence) + ") and " + rows[j].op + " (fence " +
                                   std::to_string(rows[j].fence) + ")");
        }
      }
    }

    // The semaphore: only slots below the bound were ever worked on (each
    // slot is checked above like a lock name), and never more applied
    // sections overlapped than the bound allows.
    std::vector<std::pair<double, int>> edges;
    for (const auto& [name, rows] : by_name) {
      if (name.empty() || name[0] != 's') continue;
      if (std::stoi(name.substr(1)) >= kSemaphorePermits)
        r.violations.push_back("semaphore slot " + name + " used with a bound of " + std::to_string(kSemaphorePermits));
      for (const auto& row : rows) {
        if (!row.applied) continue;
        edges.emplace_back(row.entry, 1);
        edges.emplace_back(row.exit, -1);
      }
    }
    std::sort(edges.begin(), edges.end());  // an exit sorts before an entry at the same time
    int inside = 0;
    for (const auto& [t, step] : edges) {
      inside += step;
      r.most_permits = std::max(r.most_permits, inside);
    }
    if (r.most_permits > kSemaphorePermits)
      r.violations.push_back(std::to_string(r.most_permits) + " semaphore permits in use at once (bound " +
                             std::to_string(kSemaphorePermits) + ")");

    // The read-write lock: no applied write ("w", already proved exclusive
    // among writes above) overlapped an applied read ("v").
    {
      std::vector<Row> reads, writes;
      for (const auto& row : by_name["v"])
        if (row.applied) reads.push_back(row);
      for (const auto& row : by_name["w"])
        if (row.applied) writes.push_back(row);
      r.reads = static_cast<long>(reads.size());
      r.writes = static_cast<long>(writes.size());
      std::sort(reads.begin(), reads.end(), [](const Row& x, const Row& y) { return x.entry < y.entry; });
      double longest = 0;
      for (const auto& rd : reads) longest = std::max(longest, rd.exit - rd.entry);
      for (const auto& w : writes) {
        auto it = std::lower_bound(reads.begin(), reads.end(), w.entry - longest,
                                   [](const Row& x, double t) { return x.entry < t; });
        for (; it != reads.end() && it->entry < w.exit; ++it) {
          if (it->exit <= w.entry) continue;
          ++r.rw_overlaps;
          r.violations.push_back("a write overlapped a read of rw: " + w.op + " (fence " + std::to_string(w.fence) +
                                 ") and " + it->op + " (fence " + std::to_string(it->fence) + ")");
        }
      }
      std::vector<std::pair<double, int>> read_edges;
      for (const auto& rd : reads) {
        read_edges.emplace_back(rd.entry, 1);
        read_edges.emplace_back(rd.exit, -1);
      }
      std::sort(read_edges.begin(), read_edges.end());
      int readers = 0;
      for (const auto& [t, step] : read_edges) {
        readers += step;
        r.most_readers = std::max(r.most_readers, readers);
      }
    }

    // Liveness: after each fault, every name is acquired again within
    // lease + poll + margin.
    const double bound_s = (kLeaseMs + kPollMs) / 1000.0 + 5.0;
    for (auto& [name, times] : acquired) std::sort(times.begin(), times.end());
    for (const auto& e : events_) {
      double worst = 0;
      for (int n = 0; n < cfg_.names; ++n) {
        const auto& times = acquired["r" + std::to_string(n)];
        const auto it = std::upper_bound(times.begin(), times.end(), e.end_us);
        const double s = it == times.end() ? 1e9 : (*it - e.end_us) / 1e6;
        worst = std::max(worst, s);
      }
      r.worst_recovery_s[e.kind] = std::max(r.worst_recovery_s[e.kind], worst);
      if (is_node_fault(e.kind)) {
        // Availability while the node was gone: the longest any lock name
        // went without an acquisition in the fault's window.
        double gap = 0;
        for (int n = 0; n < cfg_.names; ++n) {
          const auto& times = acquired["r" + std::to_string(n)];
          auto it = std::upper_bound(times.begin(), times.end(), e.start_us);
          std::int64_t last = it == times.begin() ? e.start_us : *std::prev(it);
          for (; it != times.end() && last <= e.end_us; ++it) {
            gap = std::max(gap, (*it - last) / 1e6);
            last = *it;
          }
        }
        char line[64];
        std::snprintf(line, sizeof line, "; longest a lock name went unacquired: %.2f s", gap);
        r.node_faults.push_back(e.kind + ": " + e.detail + line);
        if (gap > kNodeDownMs / 1000.0 + bound_s)
          r.violations.push_back("during " + e.kind + " (" + e.detail + ") a lock name went unacquired for " +
                                 std::to_string(gap) + " s");
      }
      if (worst > bound_s)
        r.violations.push_back("after " + e.kind + " (" + e.detail + ") a lock name stayed unacquired for " +
                               (worst > 1e8 ? std::string("the rest of the run") : std::to_string(worst) + " s") +
                               " (bound " + std::to_string(bound_s) + " s)");
    }
    return r;
  }

  const Config& cfg_;
  bool fenced_;
  int seconds_;
  std::set<std::string> faults_;
  std::string tag_;
  Admin admin_;
  std::int64_t until_us_ = 0;
  std::mutex m_;
  std::vector<std::unique_ptr<WorkerSlot>> slots_;
  std::vector<FaultEvent> events_;
  std::map<std::string, int> next_node_;  // per node fault kind: how many so far (nodes taken in turn)
  std::mutex violations_m_;
  std::vector<std::string> violations_;
  std::mutex snapshots_m_;
  std::vector<QueueSnapshot> snapshots_;  // under snapshots_m_ (watch_fair_queues)
  long queue_moves_ = 0;                  // the sampler thread's, read after it joined
  long handoffs_ = 0;  // direct local handoffs reported by the workers that ended the run
  long write_handoffs_ = 0;  // of them, by the read-write workers
  long permit_handoffs_ = 0;  // of them, by the semaphore workers
};

void print_summary(const RunResult& r, const std::string& title) {
  std::cout << "\n## " << title << "\n\n| measure | value |\n|---|---|\n";
  std::cout << "| lock and permit acquisitions | " << r.acquisitions << " |\n";
  std::cout << "| of them handed straight to a local waiter (workers alive at the end) | " << r.handoffs << " |\n";
  std::cout << "| of those, write sides of the read-write lock | " << r.write_handoffs << " |\n";
  std::cout << "| of those, semaphore permits | " << r.permit_handoffs << " |\n";
  std::cout << "| multi-lock sets held (names worked on under them) | " << r.multi_sets << " (" << r.multi_sections
            << ") |\n";
  std::cout << "| fair-lock grants recorded / of them checked against a queue snapshot that showed them waiting | "
            << r.fair_grants << " / " << r.grants_checked << " (" << r.queue_snapshots << " snapshots) |\n";
  std::cout << "| fair-lock grants out of queue order | " << r.order_violations << " |\n";
  if (r.queue_moves > 0)
    std::cout << "| queue entries moved to the front behind the library's back (control) | " << r.queue_moves << " |\n";
  std::cout << "| holds followed by the loss-order check / of them ended by a loss their process was told of | "
            << r.loss_holds << " / " << r.loss_told << " |\n";
  std::cout << "| grants while an earlier holder still counted its hold live | " << r.loss_violations << " |\n";
  if (r.herd_handoffs > 0)
    std::cout << "| herd handoffs (a release to the next take while herd waiters waited) / within 100 ms | "
              << r.herd_handoffs << " / " << r.herd_prompt << " |\n";
  std::cout << "| guarded workload (no fence): increments committed / lost | " << r.guarded_committed << " / "
            << r.lost_on_guarded << " |\n";
  std::cout << "| election terms in which a leader worked (one section each, fenced by the term) | "
            << r.election_terms << " |\n";
  std::cout << "| semaphore permits in use at once, at most (bound " << kSemaphorePermits << ") | " << r.most_permits
            << " |\n";
  std::cout << "| read-write lock: applied writes / applied reads (most reads at once) | " << r.writes << " / "
            << r.reads << " (" << r.most_readers << ") |\n";
  std::cout << "| increments ok (applied, acknowledged) | " << r.ok << " |\n";
  std::cout << "| writes refused by the fence | " << r.refused + r.claim_refused << " |\n";
  std::cout << "| operations failed (known not applied) | " << r.failed << " |\n";
  std::cout << "| operations unknown (connection died or worker killed) | " << r.unknown << " |\n";
  std::cout << "| increments applied / counter | " << r.applied << " / " << r.counter << " |\n";
  for (const auto& [kind, n] : r.faults) {
    std::cout << "| faults: " << kind << " | " << n;
    const auto it = r.worst_recovery_s.find(kind);
    if (it != r.worst_recovery_s.end()) std::printf(" (worst recovery %.2f s)", it->second);
    std::cout << " |\n";
  }
  std::cout << "| violations | " << r.violations.size() << " |\n";
  for (const auto& f : r.node_faults) std::cout << "  - " << f << "\n";
  for (const auto& v : r.violations) std::cout << "  - " << v << "\n";
  std::cout << std::flush;
}

int orchestrate(Config cfg) {
  std::filesystem::create_directories(cfg.out);
  std::cout << "# dlock torture: " << cfg.workers << " workers x " << cfg.threads << " threads (" << cfg.async_workers
            << " of them asynchronous: " << 3 * cfg.threads << " coroutines on 2 threads; " << cfg.semaphore_workers
            << " on semaphore \"sem\" of " << kSemaphorePermits << " permits with " << cfg.threads + kSemaphorePermits
            << " threads; " << cfg.rw_workers
            << " on read-write lock \"rw\"; " << cfg.multi_workers
            << " on sets of 2-8 of " << kMultiNames << " names taken together; " << cfg.fair_workers
            << " on fair locks; " << cfg.election_workers << " campaigning in election \"" << kElectionName << "\"; "
            << cfg.guarded_workers << " on guarded transactions, no fence; " << cfg.herd_workers << " with "
            << kHerdClients << " clients taking turns on lock \"h0\" and fair lock \"h1\"), "
            << cfg.names << " lock names, "
            << cfg.duration_s << " s, "
            << (cfg.cluster_script.empty() ? std::string("one server")
                                           : "a " + std::to_string(kClusterNodes) + "-node Galera cluster (workers on " +
                                                 (cfg.placement == "one" ? std::string("one node")
                                                                         : std::string("the proxy and every node")) +
                                                 ")")
            << ", faults:";
  for (const auto& f : cfg.faults) std::cout << " " << f;
  std::cout << std::endl;
  Run main_run(cfg, true, cfg.duration_s, cfg.faults, "main");
  const RunResult main_result = main_run.execute();
  print_summary(main_result, "fenced run");

  // Control: the same workload without the fence guard, holders paused past
  // their lease. It must lose updates, or the checker is not checking.
  Config control_cfg = cfg;
  control_cfg.fault_every_s = 4;  // many pauses: each catches a holder mid-write only by chance
  // Two semaphore processes, so a paused permit holder's slot is taken by
  // the other one and its late write can be lost too; one more worker, so
  // the lock names keep as many contenders as in the fenced run.
  if (cfg.semaphore_workers > 0) {
    control_cfg.semaphore_workers = 2;
    ++control_cfg.workers;
  }
  // Likewise two read-write processes: a paused reader's read overlaps the
  // other process's write; so does a read whose short lease lapses mid-read
  // (the control's lapsing readers, worker.cpp), which makes the overlap
  // check fail reliably rather than by chance.
  if (cfg.rw_workers > 0) {
    control_cfg.rw_workers = 2;
    ++control_cfg.workers;
  }
  Run control(control_cfg, false, cfg.quick ? 40 : 60, {"pause-holder"}, "control");
  const RunResult control_result = control.execute();
  std::cout << "\n## control run (no fence guard, holders paused, fair queues reordered, losses written down late)\n\n"
               "lost updates: " << control_result.lost_updates
            << " (" << control_result.lost_on_slots << " on semaphore slots); writes overlapping reads of the "
            << "read-write lock: " << control_result.rw_overlaps
            << "; lost updates"
            << (control_result.lost_updates > 0 ? " (caught, as it must be)" : " (NONE: the checker is not checking)");
  const bool overlaps_caught = control_cfg.rw_workers == 0 || control_result.rw_overlaps > 0;
  if (control_cfg.rw_workers > 0)
    std::cout << "; overlaps" << (overlaps_caught ? " (caught, as they must be)" : " (NONE: the overlap check is not checking)");
  // The control's fair queues are reordered behind the library's back: the
  // grant-order check must see grants out of order.
  const bool order_caught = control_cfg.fair_workers == 0 || control_result.order_violations > 0;
  // The control's workers write down each loss 5 s after they were told of
  // it (as a client whose loss waited behind a hung statement would): the
  // loss-order check must see grants before it.
  const bool late_losses_caught = control_result.loss_violations > 0;
  // The control's guarded workers commit unguarded: they must lose updates.
  const bool unguarded_caught = control_cfg.guarded_workers == 0 || control_result.lost_on_guarded > 0;
  std::cout << "; lost updates of the guarded workload without its guard: " << control_result.lost_on_guarded
            << (unguarded_caught ? " (caught, as they must be)" : " (NONE: the guarded workload is not checking)");
  std::cout << "; grants while an earlier holder still counted its hold live: " << control_result.loss_violations
            << (late_losses_caught ? " (caught, as they must be)" : " (NONE: the loss-order check is not checking)");
  if (control_cfg.fair_workers > 0)
    std::cout << "; fair-lock grants out of queue order: " << control_result.order_violations
              << (order_caught ? " (caught, as they must be)" : " (NONE: the grant-order check is not checking)");
  std::cout << "\n";
  bool ok = main_result.violations.empty() && control_result.lost_updates > 0 && overlaps_caught && order_caught &&
            late_losses_caught && unguarded_caught;
  std::cout << "\nresult: " << (ok ? "PASS" : "FAIL") << std::endl;
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace dlock::torture

int main(int argc, char** argv) {
  using namespace dlock::torture;
  std::vector<std::string> args(argv + 1, argv + argc);
  try {
    if (args.size() == 20 && args[0] == "--worker") {
      WorkerArgs w;
      w.url = args[1];
      w.machine_id = args[2];
      w.label = args[3];
      w.clients = std::stoi(args[4]);
      w.history_path = args[5];
      w.log_path = args[6];
      w.threads = std::stoi(args[7]);
      w.names = std::stoi(args[8]);
      w.pool_size = std::stoi(args[9]);
      w.fenced = args[10] == "1";
      w.until_us = std::stoll(args[11]);
      w.async = args[12] == "1";
      w.semaphore = args[13] == "1";
      w.rw = args[14] == "1";
      w.multi = args[15] == "1";
      w.fair = args[16] == "1";
      w.election = args[17] == "1";
      w.guarded = args[18] == "1";
      w.herd = args[19] == "1";
      return run_worker(w);
    }
    if (args.size() == 9 && args[0] == "--cli-worker") {
      CliWorkerArgs w;
      w.url = args[1];
      w.dlock = args[2];
      w.id = args[3];
      w.history_path = args[4];
      w.pid_path = args[5];
      w.names = std::stoi(args[6]);
      w.fenced = args[7] == "1";
      w.until_us = std::stoll(args[8]);
      w.self = argv[0];
      return run_cli_worker(w);
    }
    if (args.size() == 7 && args[0] == "--cli-step")
      return run_cli_step(args[1], args[2], args[3], args[4], args[5] == "1", std::stoi(args[6]));
    Config cfg;
    cfg.self = argv[0];
    cfg.faults.insert(kAllFaults.begin(), kAllFaults.end());
    bool duration_given = false, faults_given = false;
    for (std::size_t i = 0; i < args.size(); ++i) {
      const auto value = [&]() -> std::string {
        if (i + 1 >= args.size()) throw std::invalid_argument(args[i] + " needs a value");
        return args[++i];
      };
      if (args[i] == "--url") cfg.url = value();
      else if (args[i] == "--dlock") cfg.dlock = value();
      else if (args[i] == "--db-script") cfg.db_script = value();
      else if (args[i] == "--cluster") cfg.cluster_script = value();
      else if (args[i] == "--placement") cfg.placement = value();
      else if (args[i] == "--out") cfg.out = value();
      else if (args[i] == "--quick") cfg.quick = true;
      else if (args[i] == "--duration") { cfg.duration_s = std::stoi(value()); duration_given = true; }
      else if (args[i] == "--workers") cfg.workers = std::stoi(value());
      else if (args[i] == "--async-workers") cfg.async_workers = std::stoi(value());
      else if (args[i] == "--semaphore-workers") cfg.semaphore_workers = std::stoi(value());
      else if (args[i] == "--rw-workers") cfg.rw_workers = std::stoi(value());
      else if (args[i] == "--multi-workers") cfg.multi_workers = std::stoi(value());
      else if (args[i] == "--fair-workers") cfg.fair_workers = std::stoi(value());
      else if (args[i] == "--election-workers") cfg.election_workers = std::stoi(value());
      else if (args[i] == "--guarded-workers") cfg.guarded_workers = std::stoi(value());
      else if (args[i] == "--herd-workers") cfg.herd_workers = std::stoi(value());
      else if (args[i] == "--threads") cfg.threads = std::stoi(value());
      else if (args[i] == "--names") cfg.names = std::stoi(value());
      else if (args[i] == "--faults") {
        faults_given = true;
        cfg.faults.clear();
        std::stringstream list(value());
        std::string f;
        while (std::getline(list, f, ',')) {
          if (std::find(kAllFaults.begin(), kAllFaults.end(), f) == kAllFaults.end())
            throw std::invalid_argument("unknown fault kind '" + f + "'");
          cfg.faults.insert(f);
        }
      } else {
        throw std::invalid_argument("unknown argument '" + args[i] + "'");
      }
    }
    const bool cluster = !cfg.cluster_script.empty();
    if (cluster) {
      if (!cfg.url.empty() || !cfg.db_script.empty())
        throw std::invalid_argument("--cluster takes the place of --url and --db-script");
      const std::string script = "'" + cfg.cluster_script + "'";
      for (int n = 1; n <= kClusterNodes; ++n) cfg.node_urls.push_back(shell(script + " url " + std::to_string(n)));
      cfg.proxy_url = shell(script + " url proxy");
      cfg.url = multi_host_url(cfg.node_urls, 0);
      if (cfg.placement != "one" && cfg.placement != "several")
        throw std::invalid_argument("--placement must be one or several");
    }
    for (const auto& f : std::set<std::string>(cfg.faults)) {
      // The default set: the kinds of the kind of database the run has.
      if (cluster ? is_server_fault(f) : is_node_fault(f)) {
        if (faults_given)
          throw std::invalid_argument("fault kind '" + f + "' needs " + (cluster ? "one server (no --cluster)" : "--cluster"));
        cfg.faults.erase(f);
      }
    }
    if (cfg.url.empty() || (!cluster && cfg.db_script.empty()) || cfg.out.empty())
      throw std::invalid_argument("--url, --db-script (or --cluster) and --out are required");
    // Quick mode injects every kind once: 10 kinds, one every 9 s, fit in
    // 110 s; on a cluster the node faults take 20-50 s each.
    if (cfg.quick && !duration_given) cfg.duration_s = cluster ? 200 : 110;
    if (cfg.quick) cfg.fault_every_s = 9;
    if (cfg.workers < 1 || cfg.threads < 1 || cfg.names < 1 || cfg.duration_s < 15)
      throw std::invalid_argument("workers, threads, names >= 1 and duration >= 15 s");
    if (cfg.async_workers < 0 || cfg.async_workers > cfg.workers)
      throw std::invalid_argument("--async-workers must be 0 to --workers");
    if (cfg.semaphore_workers < 0 || cfg.async_workers + cfg.semaphore_workers > cfg.workers)
      throw std::invalid_argument("--semaphore-workers must be 0 to --workers minus --async-workers");
    if (cfg.rw_workers < 0 || cfg.async_workers + cfg.semaphore_workers + cfg.rw_workers > cfg.workers)
      throw std::invalid_argument("--rw-workers must be 0 to --workers minus the async and semaphore workers");
    if (cfg.multi_workers < 0 ||
        cfg.async_workers + cfg.semaphore_workers + cfg.rw_workers + cfg.multi_workers > cfg.workers)
      throw std::invalid_argument("--multi-workers must be 0 to --workers minus the async, semaphore and read-write workers");
    if (cfg.fair_workers < 0 || cfg.async_workers + cfg.semaphore_workers + cfg.rw_workers + cfg.multi_workers +
                                        cfg.fair_workers >
                                    cfg.workers)
      throw std::invalid_argument("--fair-workers must be 0 to --workers minus the other workloads' workers");
    if (cfg.election_workers < 0 || cfg.async_workers + cfg.semaphore_workers + cfg.rw_workers + cfg.multi_workers +
                                            cfg.fair_workers + cfg.election_workers >
                                        cfg.workers)
      throw std::invalid_argument("--election-workers must be 0 to --workers minus the other workloads' workers");
    if (cfg.guarded_workers < 0 || cfg.herd_workers < 0 ||
        cfg.async_workers + cfg.semaphore_workers + cfg.rw_workers + cfg.multi_workers + cfg.fair_workers +
                cfg.election_workers + cfg.guarded_workers + cfg.herd_workers >
            cfg.workers)
      throw std::invalid_argument(
          "--guarded-workers and --herd-workers must be 0 to --workers minus the other workloads' workers");
    return orchestrate(cfg);
  } catch (const std::invalid_argument& e) {
    std::cerr << "dlock_torture: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "dlock_torture: " << e.what() << "\n";
    return 1;
  }
}
