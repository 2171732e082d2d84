// dlock: a distributed flock(1), lock inspection and administration, on the
// MySQL/MariaDB lock table of the dlock library.
//
//   dlock [--url URL] [--table T] run [--wait DUR | --no-wait] [--lease DUR] NAME -- COMMAND [ARGS...]
//   dlock [--url URL] [--table T] status [--json] [NAME...]
//   dlock [--url URL] [--table T] force-unlock NAME...
//   dlock [--url URL] [--table T] init [--print-sql]
//
// Exit codes are in exit_codes.hpp and `dlock --help`.
#include <CLI/CLI.hpp>
#include <dlock/dlock.hpp>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "admin_commands.hpp"
#include "duration.hpp"
#include "exit_codes.hpp"
#include "run_command.hpp"
#include "validation.hpp"

namespace {

using namespace dlock;
using namespace dlock::cli;

constexpr const char* kExitCodesHelp =
    "Exit codes: 0 success, or the command's own status with `run` (killed by\n"
    "signal N: 128+N); 1 `run` could not get the lock in time (--conflict-exit-code)\n"
    "or `force-unlock` found a name not held; 2 bad command line; 3 database\n"
    "error; 200 `run` lost the lock while the command ran (it was terminated).\n"
    "Durations: a whole number and a unit: 500ms, 30s, 5m, 1h.\n"
    "Connection: --url mysql://user:password@host:port/database[?table=T&...]\n"
    "or the DLOCK_URL environment variable.";

struct Global {
  std::string url;
  std::string table;
  bool verbose = false;
};

Options resolve_options(const Global& g) {
  if (g.url.empty()) throw std::invalid_argument("no database: pass --url mysql://... or set DLOCK_URL");
  Options o = Options::from_url(g.url);
  if (!g.table.empty()) o.table = g.table;
  details::validate_options(o);
  return o;
}

void validate_names(const std::vector<std::string>& names) {
  for (const auto& n : names) details::validate_name(n);
}

void setup_logging(bool verbose) {
  auto logger = spdlog::stderr_color_mt("dlock");
  // The command reports what matters itself, in one line; library chatter is
  // for --verbose.
  logger->set_level(verbose ? spdlog::level::debug : spdlog::level::off);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"dlock: a distributed lock on MySQL/MariaDB, for shell scripts and operators", "dlock"};
  app.footer(kExitCodesHelp);
  app.require_subcommand(1);
  app.fallthrough();
  Global g;
  app.add_option("--url", g.url, "mysql://user:password@host:port/database[?options]")->envname("DLOCK_URL");
  app.add_option("--table", g.table, "lock table (default: distributed_lock, or table= in the URL)");
  app.add_flag("-v,--verbose", g.verbose, "log the library's debug output to stderr");

  RunArgs run;
  std::string wait_text, lease_text, kill_after_text = "10s", check_text = "1s";
  bool no_wait = false;
  auto* run_cmd = app.add_subcommand("run", "hold a lock while a command runs (like flock(1))");
  auto* wait_opt = run_cmd->add_option("--wait", wait_text, "give up after this long (default: wait forever)");
  run_cmd->add_flag("--no-wait", no_wait, "one attempt; do not wait")->excludes(wait_opt);
  run_cmd->add_option("--lease", lease_text, "fixed lease, no renewal (default: watchdog-renewed lease)");
  run_cmd->add_option("--conflict-exit-code", run.conflict_exit_code, "exit code when the lock is not had (default 1)")
      ->check(CLI::Range(0, 255));
  run_cmd->add_option("--kill-after", kill_after_text, "grace between SIGTERM and SIGKILL on a lost lock (default 10s)");
  run_cmd->add_option("--check-interval", check_text, "how often the hold is confirmed while the command runs (default 1s)");
  run_cmd->add_option("name", run.name, "lock name")->required();
  run_cmd->add_option("command", run.command, "command and arguments, after --")->required();
  run_cmd->footer(
      "The command gets DLOCK_NAME and DLOCK_FENCE (the fencing token) in its environment.\n"
      "SIGINT, SIGTERM and SIGHUP sent to dlock are forwarded to it.");

  bool json = false;
  std::vector<std::string> status_names;
  auto* status_cmd = app.add_subcommand("status", "show held locks, or the named ones");
  status_cmd->add_flag("--json", json, "one JSON object per line");
  status_cmd->add_option("names", status_names, "lock names (default: every held lock)");

  std::vector<std::string> force_names;
  auto* force_cmd = app.add_subcommand("force-unlock", "clear the holders of the named locks");
  force_cmd->add_option("names", force_names, "lock names")->required();

  bool print_sql = false;
  auto* init_cmd = app.add_subcommand("init", "create the lock table (idempotent)");
  init_cmd->add_flag("--print-sql", print_sql, "print the CREATE TABLE statement instead of running it");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help
    std::cerr << "dlock: " << e.what() << " (see dlock --help)\n";
    return kExitUsage;
  }

  try {
    setup_logging(g.verbose);
    if (init_cmd->parsed() && print_sql) {
      std::string table = g.table;
      if (table.empty()) table = g.url.empty() ? "distributed_lock" : Options::from_url(g.url).table;
      details::validate_table_name(table);
      std::cout << schema_sql(table) << "\n";
      return kExitOk;
    }
    // Everything below is checked before the database is touched.
    const Options options = resolve_options(g);
    if (run_cmd->parsed()) {
      validate_names({run.name});
      if (no_wait) run.wait = Millis::zero();
      if (!wait_text.empty()) run.wait = parse_duration(wait_text, true);
      if (!lease_text.empty()) run.lease = parse_duration(lease_text);
      run.kill_after = parse_duration(kill_after_text, true);
      run.check_interval = parse_duration(check_text);
      return run_command(options, run);
    }
    if (status_cmd->parsed()) {
      validate_names(status_names);
      return status_command(options, status_names, json);
    }
    if (force_cmd->parsed()) {
      validate_names(force_names);
      return force_unlock_command(options, force_names);
    }
    return init_command(options);
  } catch (const std::invalid_argument& e) {
    std::string what = e.what();
    if (what.rfind("dlock: ", 0) == 0) what = what.substr(7);
    std::cerr << "dlock: " << what << "\n";
    return kExitUsage;
  } catch (const BackendError& e) {
    std::string what = e.what();
    if (what.rfind("dlock: ", 0) == 0) what = what.substr(7);
    std::cerr << "dlock: database error: " << what << "\n";
    return kExitBackend;
  } catch (const std::exception& e) {
    std::cerr << "dlock: " << e.what() << "\n";
    return kExitBackend;
  }
}
