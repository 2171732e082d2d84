#include "leader_command.hpp"

#include <dlock/dlock.hpp>
#include <signal.h>

#include <atomic>
#include <iostream>
#include <nlohmann/json.hpp>
#include <thread>

#include "api/tools.hpp"
#include "exit_codes.hpp"
#include "lock_view.hpp"

namespace dlock::cli {

namespace {

// One view of the election, as a line of text or JSON. `value` is bytes:
// shown as text when it is UTF-8 (escaped for the terminal), and in JSON
// also as value_hex when it is not.
std::string describe(const std::string& name, const details::ElectionRow& row, bool json) {
  if (json) {
    nlohmann::ordered_json j;
    j["name"] = name;
    j["revision"] = row.view_revision();
    if (row.live) {
      nlohmann::ordered_json l;
      l["value"] = row.value;
      if (!is_utf8(row.value)) l["value_hex"] = to_hex(row.value);
      l["term"] = row.fence;
      l["machine_id"] = row.machine;
      l["host"] = row.host;
      l["pid"] = row.pid;
      l["since"] = row.acquired_at;
      if (row.ttl_us) l["expires_in_ms"] = *row.ttl_us / 1000;
      j["leader"] = l;
    } else {
      j["leader"] = nullptr;
    }
    return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  }
  std::string line = readable_name(name) + ": ";
  if (!row.live) return line + "no leader (revision " + std::to_string(row.view_revision()) + ")";
  return line + "led by " + row.machine + " (host " + row.host + ", pid " + std::to_string(row.pid) + ") since " +
         row.acquired_at + ", term " + std::to_string(row.fence) + ", value \"" + readable_name(row.value) +
         "\" (revision " + std::to_string(row.view_revision()) + ")";
}

}  // namespace

int leader_command(const Options& options, const std::string& name, bool json, bool watch) {
  if (!watch) {
    DatabaseDistributedLock client(options);
    std::cout << describe(name, details::ClientAccess::of(client).election(name), json) << std::endl;
    return kExitOk;
  }
  // SIGINT, SIGTERM, SIGHUP end the watch. Blocked before the client
  // starts its threads (they inherit the mask) and taken by a thread of
  // their own, which ends the observer's wait: the watch waits for changes
  // (the poller's, the bells') instead of looking every so often.
  sigset_t stop;
  sigemptyset(&stop);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&stop, sig);
  ::pthread_sigmask(SIG_BLOCK, &stop, nullptr);
  DatabaseDistributedLock client(options);
  details::Engine& engine = details::ClientAccess::of(client);
  const details::NameKey key(details::Kind::kElection, name);
  std::atomic<bool> stopped{false};
  std::atomic<int> signal_number{0};
  std::thread signals([&] {
    const timespec tick{0, 100'000'000};
    while (!stopped) {
      const int sig = ::sigtimedwait(&stop, nullptr, &tick);
      if (sig <= 0) continue;
      signal_number = sig;
      stopped = true;
      engine.interrupt_waits(key);  // the observer looks at `stopped`
    }
  });
  int code = kExitOk;
  try {
    details::ElectionRow row = engine.election(name);
    std::cout << describe(name, row, json) << std::endl;
    std::uint64_t seen = row.view_revision();
    while (!stopped) {
      const auto request = engine.make_observe_request(name, Owner::this_thread().id(), seen, std::nullopt);
      if (const auto changed = engine.observe(request, &stopped)) {
        seen = changed->view_revision();
        std::cout << describe(name, *changed, json) << std::endl;
      }
    }
    code = 128 + signal_number.load();
  } catch (...) {
    stopped = true;
    signals.join();
    throw;
  }
  signals.join();
  return code;
}

}  // namespace dlock::cli
