// async_demo: hundreds of coroutines on one io_context, one thread, sharing
// a handful of lock names through one dlock client.
//
//   async_demo URL [COROUTINES] [NAMES] [ROUNDS]      (defaults: 300 5 3)
//
// Each coroutine is its own owner (Owner::create(): a coroutine may resume
// on another thread, so it must not act as one). It takes a name with
// co_await async_lock, checks that nobody else is inside that name's
// critical section and that the name's fencing token has grown, yields,
// and lets go with co_await async_unlock. While they wait, the coroutines
// hold no thread: the process's thread count stays flat however many wait.
//
// Exit status 0 when every turn was exclusive and fenced in order.
#include <dlock/asio.hpp>
#include <dlock/dlock.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>

#include <dirent.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <exception>
#include <iostream>
#include <string>
#include <vector>

namespace asio = boost::asio;
using namespace std::chrono_literals;

namespace {

std::size_t thread_count() {
  std::size_t n = 0;
  if (DIR* d = ::opendir("/proc/self/task")) {
    while (const dirent* e = ::readdir(d)) {
      if (e->d_name[0] != '.') ++n;
    }
    ::closedir(d);
  }
  return n;
}

struct Name {
  std::string lock_name;
  int inside = 0;              // coroutines in its critical section now
  std::uint64_t last_fence = 0;
  int turns = 0;
};

struct Tally {
  int violations = 0;
  int done = 0;
  std::size_t max_threads = 0;
};

asio::awaitable<void> worker(dlock::DatabaseDistributedLock& client, std::vector<Name>& names, int id, int rounds,
                             Tally& tally) {
  // One owner per coroutine: its holds follow it across threads.
  const dlock::Owner owner = dlock::Owner::create();
  for (int round = 0; round < rounds; ++round) {
    Name& name = names[static_cast<std::size_t>(id + round) % names.size()];
    dlock::Lock lock = client.get_lock(name.lock_name, owner);
    co_await dlock::async_lock(lock, asio::use_awaitable);
    const std::uint64_t fence = lock.fencing_token();  // known from the acquire: no SQL
    if (++name.inside != 1 || fence <= name.last_fence) ++tally.violations;
    name.last_fence = fence;
    ++name.turns;
    // A little work inside the critical section, yielding to the others.
    asio::steady_timer pause(co_await asio::this_coro::executor, 1ms);
    co_await pause.async_wait(asio::use_awaitable);
    --name.inside;
    co_await dlock::async_unlock(lock, asio::use_awaitable);
  }
  ++tally.done;
}

// Samples the thread count while the coroutines run.
asio::awaitable<void> watch_threads(Tally& tally, int coroutines) {
  asio::steady_timer tick(co_await asio::this_coro::executor);
  while (tally.done < coroutines) {
    tally.max_threads = std::max(tally.max_threads, thread_count());
    tick.expires_after(20ms);
    co_await tick.async_wait(asio::use_awaitable);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || argc > 5) {
    std::cerr << "usage: async_demo URL [COROUTINES] [NAMES] [ROUNDS]\n";
    return 2;
  }
  try {
    const int coroutines = argc > 2 ? std::stoi(argv[2]) : 300;
    const int name_count = argc > 3 ? std::stoi(argv[3]) : 5;
    const int rounds = argc > 4 ? std::stoi(argv[4]) : 3;
    if (coroutines < 1 || name_count < 1 || rounds < 1) throw std::invalid_argument("counts must be positive");
    const dlock::Options options = dlock::Options::from_url(argv[1]);
    dlock::DatabaseDistributedLock client(options);
    std::vector<Name> names(static_cast<std::size_t>(name_count));
    for (int i = 0; i < name_count; ++i) names[static_cast<std::size_t>(i)].lock_name = "demo:async:" + std::to_string(i);

    asio::io_context io;  // run by this thread alone
    Tally tally;
    // The client's workers start with its first asynchronous call; count
    // the threads after that, so the baseline is the client's fixed set.
    dlock::Lock warm = client.get_lock("demo:async:warm-up", dlock::Owner::create());
    dlock::async_lock(warm, asio::use_future).get();
    dlock::async_unlock(warm, asio::use_future).get();
    const std::size_t threads_before = thread_count();
    // The rest of the fixed set: bell connections (fast wake-up across
    // clients), each started on first need.
    const std::size_t fixed_set = threads_before + (options.fast_wakeup ? options.wakeup_connections : 0);

    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < coroutines; ++i) asio::co_spawn(io, worker(client, names, i, rounds, tally), asio::detached);
    asio::co_spawn(io, watch_threads(tally, coroutines), asio::detached);
    io.run();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

    int turns = 0;
    for (const Name& n : names) turns += n.turns;
    std::cout << "   " << coroutines << " coroutines on one thread, " << name_count << " names, " << turns
              << " turns in " << seconds << " s\n"
              << "   threads: " << threads_before << " before (this one, the client's io thread, " << options.pool_size
              << " workers and its deadline timer), at most " << tally.max_threads << " while they ran (fixed set: " << fixed_set
              << ", with the bell connections)\n";
    for (const Name& n : names) {
      std::cout << "   " << n.lock_name << ": " << n.turns << " turns, last fence " << n.last_fence << "\n";
    }
    if (tally.violations != 0 || turns != coroutines * rounds || tally.max_threads > fixed_set) {
      std::cout << "   FAILED: " << tally.violations << " overlapping or out-of-order turns; " << turns << " of "
                << coroutines * rounds << " turns; thread count " << tally.max_threads << " vs " << fixed_set
                << "\n";
      return 1;
    }
    std::cout << "   OK: every turn exclusive, fences increasing per name; waiting coroutines took no threads\n";
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "async_demo: " << e.what() << "\n";
    return 1;
  }
}
