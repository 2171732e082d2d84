#include "top_command.hpp"

#include <dlock/dlock.hpp>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <iostream>

#include "activity_view.hpp"
#include "duration.hpp"
#include "exit_codes.hpp"

namespace dlock::cli {

namespace {

// "HH:MM:SS" of this machine's clock, for the header only.
std::string clock_now() {
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  ::localtime_r(&now, &local);
  char text[16];
  std::strftime(text, sizeof text, "%H:%M:%S", &local);
  return text;
}

std::string view_text(const Options& options, const TopArgs& args, const Activity& a) {
  std::string out = "dlock top: " + options.database + "." + options.table + " at " + clock_now() +
                    (args.once ? "" : " (every " + format_duration(args.interval) + ")") + "\n" +
                    summary_line(a) + "\n";
  if (!a.holds.empty()) out += "\n" + format_cells(hold_cells(a.holds));
  if (!a.waiters.empty()) out += "\n" + format_cells(waiter_cells(a.waiters));
  return out;
}

}  // namespace

int top_command(const Options& options, const TopArgs& args) {
  ActivityQuery query;
  query.names = args.names;
  query.types = args.types;
  query.limit = args.limit;
  if (args.once) {
    const Activity a = inspect(options, query);
    std::cout << (args.json ? snapshot_json(a) + "\n" : view_text(options, args, a)) << std::flush;
    return kExitOk;
  }
  // The signals that end the view, blocked before the client starts its
  // threads (they inherit the mask) and waited for between refreshes.
  sigset_t stop;
  sigemptyset(&stop);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&stop, sig);
  ::pthread_sigmask(SIG_BLOCK, &stop, nullptr);
  Options reader = options;
  reader.create_table = false;  // a view creates nothing: no table is an error, as with --once
  DatabaseDistributedLock client(reader);  // one pooled connection, reused by every refresh
  const bool terminal = ::isatty(STDOUT_FILENO) == 1;
  for (bool first = true;; first = false) {
    std::string view;
    try {
      const Activity a = client.inspect(query);
      view = args.json ? snapshot_json(a) + "\n" : view_text(options, args, a);
    } catch (const BackendError& e) {
      if (args.json) {
        std::cerr << "dlock: database error: " << e.what() << "\n";
      } else {
        view = "dlock top: " + options.database + "." + options.table + " at " + clock_now() +
               ": database error: " + e.what() + "\n";
      }
    }
    if (terminal && !args.json) {
      std::cout << "\x1b[H\x1b[2J" << view;  // home, clear: this view replaces the last
    } else {
      std::cout << (first || args.json || view.empty() ? "" : "\n") << view;
    }
    std::cout << std::flush;
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(args.interval).count();
    const timespec pause{static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
    if (::sigtimedwait(&stop, nullptr, &pause) > 0) return kExitOk;
  }
}

}  // namespace dlock::cli
