#include "leader_command.hpp"

#include <dlock/dlock.hpp>
#include <signal.h>

#include <atomic>
#include <iostream>
#include <nlohmann/json.hpp>
#include <thread>

#include "api/tools.hpp"
#include "exit_codes.hpp"
#include "names.hpp"

namespace dlock::cli {

namespace {

// The leadership's hold as introspection shows it (client label, since,
// lease left), if it is still the one of `term`.
std::optional<HoldInfo> leadership(DatabaseDistributedLock& client, const std::string& name, std::uint64_t term) {
  ActivityQuery query;
  query.names = {name};
  query.types = {HoldType::kElection};
  for (auto& h : client.inspect(query).holds)
    if (h.fence == term) return std::move(h);
  return std::nullopt;
}

// One view of the election, as a line of text or JSON. `value` is bytes:
// shown as text when it is UTF-8 (escaped for the terminal), and in JSON
// also as value_hex when it is not.
std::string describe(DatabaseDistributedLock& client, const std::string& name, const LeaderView& view, bool json) {
  std::optional<HoldInfo> hold;
  if (view.leader) hold = leadership(client, name, view.leader->term);
  if (json) {
    nlohmann::ordered_json j;
    j["name"] = name;
    j["revision"] = view.revision;
    if (view.leader) {
      const Leader& l = *view.leader;
      nlohmann::ordered_json o;
      o["value"] = l.value;
      if (!is_utf8(l.value)) o["value_hex"] = to_hex(l.value);
      o["term"] = l.term;
      o["machine_id"] = hold ? nlohmann::ordered_json(hold->machine) : nlohmann::ordered_json();
      o["host"] = l.host;
      o["pid"] = l.pid;
      o["since"] = hold ? nlohmann::ordered_json(hold->acquired_at) : nlohmann::ordered_json();
      if (hold) o["expires_in_ms"] = hold->expires_in.count() / 1000;
      j["leader"] = o;
    } else {
      j["leader"] = nullptr;
    }
    return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  }
  std::string line = readable_name(name) + ": ";
  if (!view.leader) return line + "no leader (revision " + std::to_string(view.revision) + ")";
  const Leader& l = *view.leader;
  return line + "led by " + (hold ? readable_name(hold->machine) + " " : std::string()) + "(host " +
         readable_name(l.host) + ", pid " + std::to_string(l.pid) + ")" +
         (hold ? " since " + hold->acquired_at : std::string()) + ", term " + std::to_string(l.term) + ", value \"" +
         readable_name(l.value) + "\" (revision " + std::to_string(view.revision) + ")";
}

}  // namespace

int leader_command(const Options& options, const std::string& name, bool json, bool watch) {
  if (!watch) {
    DatabaseDistributedLock client(options);
    std::cout << describe(client, name, client.get_election(name).leader(), json) << std::endl;
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
  details::Elections& elections = details::EngineAccess::elections(client);
  details::Engine& engine = elections.engine();
  const details::NameKey key = details::Elections::key(name);
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
    const Election election = client.get_election(name);
    LeaderView view = election.leader();
    std::cout << describe(client, name, view, json) << std::endl;
    while (!stopped) {
      // The library's observer wait, which the signal thread can end.
      const auto request = elections.make_observe_request(name, Owner::this_thread().id(), view.revision, std::nullopt);
      if (elections.observe(request, &stopped)) {
        view = election.leader();
        std::cout << describe(client, name, view, json) << std::endl;
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
