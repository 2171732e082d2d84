#include "leader_command.hpp"

#include <dlock/dlock.hpp>
#include <signal.h>

#include <iostream>
#include <nlohmann/json.hpp>

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
  // SIGINT, SIGTERM, SIGHUP end the watch; taken synchronously, so the
  // client's threads (which inherit the mask) never see them.
  sigset_t stop;
  sigemptyset(&stop);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&stop, sig);
  ::pthread_sigmask(SIG_BLOCK, &stop, nullptr);
  DatabaseDistributedLock client(options);
  details::Engine& engine = details::ClientAccess::of(client);
  std::uint64_t seen = 0;
  bool first = true;
  for (;;) {
    // Short looks, so a signal ends the watch within a fraction of a second.
    const auto request = engine.make_observe_request(name, Owner::this_thread().id(), seen, Millis(200));
    if (const auto row = first ? std::optional<details::ElectionRow>(engine.election(name)) : engine.observe(request)) {
      first = false;
      seen = row->view_revision();
      std::cout << describe(name, *row, json) << std::endl;
    }
    const timespec now{0, 0};
    const int sig = ::sigtimedwait(&stop, nullptr, &now);
    if (sig > 0) return 128 + sig;
  }
}

}  // namespace dlock::cli
