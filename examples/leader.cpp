// A service that does leader-only work and follows the leader. Run several
// copies (on one host or many): one leads at a time and does the periodic
// work, passing its term to what it writes (a fencing token); the others
// print who leads and take over at once when the leader resigns (or once
// its lease ends, when it dies).
//   leader mysql://user:password@host:port/database NAME [ROUNDS]
// NAME identifies this copy (its proclaimed value, e.g. its address). A
// leader resigns after ROUNDS rounds of work (default 5), so the copies
// take turns.
#include <dlock/dlock.hpp>

#include <chrono>
#include <iostream>
#include <string>
#include <thread>

int main(int argc, char** argv) {
  if (argc < 3 || argc > 4) {
    std::cerr << "usage: leader mysql://user:password@host:port/database NAME [ROUNDS]\n";
    return 2;
  }
  const std::string me = argv[2];
  const int rounds = argc == 4 ? std::stoi(argv[3]) : 5;
  try {
    dlock::DatabaseDistributedLock client(dlock::Options::from_url(argv[1]));
    // One Owner for the leadership: the work may move between threads.
    dlock::Election election = client.get_election("example/scheduler", dlock::Owner::create());

    // Follow the leader until we may lead ourselves: observe() returns at
    // each change (a new leader, a proclaim, a resign).
    const dlock::LeaderView now = election.leader();
    if (now.leader) std::cout << me << ": following " << now.leader->value << " (term " << now.leader->term << ")\n";

    const std::uint64_t term = election.campaign(me);  // blocks until this copy leads
    std::cout << me << ": leading, term " << term << std::endl;
    for (int i = 1; i <= rounds; ++i) {
      // Leader-only work. Pass `term` to the resource, which refuses a
      // smaller one than it has seen (a deposed leader's late write).
      std::cout << me << ": round " << i << " with fencing token " << term << std::endl;
      election.proclaim(me + " (round " + std::to_string(i) + ")");
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      if (!election.is_leader()) {  // lost (e.g. the database was out of reach past the lease)
        std::cout << me << ": leadership lost; stopping leader work\n";
        break;
      }
    }
    election.resign();  // the next candidate takes over at once
    const auto after = election.observe(0, std::chrono::seconds(2));
    if (after && after->leader) std::cout << me << ": handed over to " << after->leader->value << "\n";
    return 0;
  } catch (const std::exception& e) {
    std::cerr << me << ": " << e.what() << "\n";
    return 1;
  }
}
