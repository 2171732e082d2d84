// dlock_torture: a Jepsen-style fault-injection run. Worker processes take
// locks and do fenced read-modify-writes while a nemesis injects faults; a
// checker reads the audit trail and the workers' histories afterwards.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace dlock::torture {

// Lease lengths the workers use: watchdog mode renews a 2 s lease, lease
// mode takes 3 s. A pause of 4 s outlives both.
inline constexpr int kWatchdogMs = 2000;
inline constexpr int kLeaseMs = 3000;
// The lease of the control run's lapsing holders (worker.cpp): readers of
// the read-write lock, and some lock holders, whose sections outlast it.
inline constexpr int kLapsingLeaseMs = 20;
inline constexpr int kPollMs = 1000;
// The semaphore workload's bound: "sem" admits 2 holders at once. Each
// permit's critical section works on the resource of its slot ("s0", "s1"),
// fenced by the slot's token, so the mutex checker proves each slot had one
// holder at a time, and the slot names prove there were never more than 2.
inline constexpr int kSemaphorePermits = 2;
// The read-write workload: threads take the read or the write side of
// read-write lock "rw". A write does the fenced read-modify-write on
// resource "w" with its token (the mutex checker proves writes never
// overlap); a read claims "w" with its token too (so a write granted before
// it, whose holder lost it, is refused) and records a fenced read on "v". The
// checker proves no applied write overlapped an applied read.

// The multi-lock workload: threads take random sets of 2 to 8 of the lock
// names "m0" .. "m<kMultiNames-1>", listed in random order, with one
// MultiLock; inside, the fenced read-modify-write on each name's resource
// with that name's token (the mutex checker proves no name had two holders).
// Right after an acquire that took less than half a lease, every name of
// the set must be held by the thread in the lock table, else the worker
// records "partial" (a violation).
inline constexpr int kMultiNames = 10;
// The fair-lock workload: threads take fair locks "f0" and "f1" (granted in
// arrival order, handed over by the release itself) and do the fenced
// read-modify-write on the name's resource with its token; each grant's
// hold id goes to the history, for the grant-order check (grant_order.hpp).
inline constexpr int kFairNames = 2;
// The election workload: threads campaign in election "e0" (each an Owner
// of its own), and each term's leader does one fenced read-modify-write on
// resource "e0" with its term, then resigns: the mutex checker proves no
// two leaders acted at once (a term granted twice, or two overlapping
// sections whose older one landed, is a violation).
inline constexpr const char* kElectionName = "e0";
// The guarded workload (docs/guarded-transactions.md): threads take lock
// "g0" or "g1" with a fixed lease and, in one transaction on the same
// database, read the name's counter, write it plus one and an audit row,
// run the lock's guard last and commit, with no fence anywhere. Now and
// then a thread pauses past its lease between the read and the write, or
// between the write and the guard. Lost updates on "g*" are the checker's
// count; the control run drops the guard and must lose some.
inline constexpr int kGuardedNames = 2;
// The herd workload: each herd worker process runs kHerdClients clients
// (each its own DatabaseDistributedLock), one thread each, all taking turns
// on two names: lock "h0" and fair lock "h1", with the fenced
// read-modify-write on the name's resource. Each wait goes to the history
// ("herdwait NAME START END"): a name left free for longer than
// kHerdStuckMs while a herd waiter waited, outside a fault that stalls the
// server or cuts clients off, is a lost wake the poll did not repair.
inline constexpr int kHerdClients = 8;
inline constexpr const char* kHerdNames[] = {"h0", "h1"};
inline constexpr std::int64_t kHerdStuckMs = 8000;

inline std::int64_t now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

struct WorkerArgs {
  std::string url;
  std::string machine_id;    // "w<index>-<incarnation>": unique, names ops and audit rows
  std::string label;         // Options::machine_id of its clients (shared by two workers with shared-id)
  int clients = 1;           // clients in the process, all with `label`; threads alternate between them
  std::string history_path;  // appended to, one line per event
  std::string log_path;      // the worker's stderr
  int threads = 2;
  int names = 3;
  int pool_size = 4;
  bool fenced = true;
  std::int64_t until_us = 0;  // wall-clock end of the run
  // The asynchronous workload: instead of `threads` threads, 3 x `threads`
  // coroutines on an io_context run by 2 threads, each an Owner of its own
  // (a coroutine may resume on either thread), using async_try_lock and
  // async_unlock.
  bool async = false;
  // The semaphore workload: `threads` threads acquiring permits of "sem"
  // (bound kSemaphorePermits) instead of locks.
  bool semaphore = false;
  // The read-write workload: `threads` threads on read-write lock "rw".
  bool rw = false;
  // The multi-lock workload: `threads` threads on sets of "m*" names.
  bool multi = false;
  // The fair-lock workload: `threads` threads per client on "f*".
  bool fair = false;
  // The election workload: `threads` candidates per client in "e0".
  bool election = false;
  // The guarded workload: `threads` threads on "g*".
  bool guarded = false;
  // The herd workload: one thread per client (kHerdClients) on "h0", "h1".
  bool herd = false;
};

int run_worker(const WorkerArgs& args);

// The CLI workload: a loop of `dlock run --wait 2s NAME -- SELF --cli-step
// ...`, one at a time, until `until_us`. The pid of the dlock process
// running now is kept in `pid_path` (for the kill-dlock fault).
struct CliWorkerArgs {
  std::string url;  // with table= and the lease parameters
  std::string dlock;
  std::string self;
  std::string id;  // "c<index>-<incarnation>"
  std::string history_path;
  std::string pid_path;
  int names = 3;
  bool fenced = true;
  std::int64_t until_us = 0;
};
int run_cli_worker(const CliWorkerArgs& args);

// One critical section run by `dlock run` (fence from DLOCK_FENCE). It
// pauses 200-600 ms inside, watching its dlock process (the CLI worker's
// child among its ancestors): if it is still running a second after that
// is gone (dlock was killed and the command survived it), it
// writes "orphan OP" to the history, which the checker counts as a
// violation, and goes on like any command that does not know.
// `cli_worker`: the pid of the CLI worker, whose child is the dlock process.
int run_cli_step(const std::string& url, const std::string& name, const std::string& op,
                 const std::string& history_path, bool fenced, int cli_worker);

}  // namespace dlock::torture
