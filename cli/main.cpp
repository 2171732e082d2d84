// dlock: a distributed flock(1), lock inspection and administration, on the
// MySQL/MariaDB lock table of the dlock library.
//
//   dlock [--url URL] [--table T] run [-w DUR | -n] [--lease DUR] [-s | -x | --permits N] [-E CODE] NAME COMMAND [ARGS...]
//   dlock [--url URL] [--table T] run [-w DUR | -n] [--lease DUR] [-E CODE] -c 'SHELL COMMAND' NAME
//   dlock [--url URL] [--table T] elect [-w DUR | -n] [--value V] [-E CODE] NAME COMMAND [ARGS...]
//   dlock [--url URL] [--table T] leader [--json] [--watch] NAME
//   dlock [--url URL] [--table T] status [--json] [NAME...]
//   dlock [--url URL] [--table T] top [--once] [--json] [--limit N] [--kind K]... [--interval DUR] [NAME...]
//   dlock [--url URL] [--table T] force-unlock [--semaphore | -s | -x | --read-write | --fair | --election] NAME...
//   dlock [--url URL] [--table T] init [--print-sql]
//
// Exit codes are in exit_codes.hpp and `dlock --help`.
#include <CLI/CLI.hpp>
#include <dlock/dlock.hpp>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "admin_commands.hpp"
#include "duration.hpp"
#include "exit_codes.hpp"
#include "leader_command.hpp"
#include "names.hpp"
#include "run_command.hpp"
#include "top_command.hpp"
#include "api/tools.hpp"

namespace {

using namespace dlock;
using namespace dlock::cli;

constexpr const char* kExitCodesHelp =
    "Exit codes: 0 success, or the command's own status with `run` and `elect` (killed\n"
    "by signal N: 128+N); 1 `run` could not get the lock in time, `elect` did not become\n"
    "leader in time (-E/--conflict-exit-code), or `force-unlock` found a name not held;\n"
    "2 bad command line; 3 database error; 126 the command is not executable; 127 the\n"
    "command was not found; 200 `run` lost the lock (`elect`: the leadership) while the\n"
    "command ran (it was terminated).\n"
    "Durations: seconds (5, 0.5) or with units: 500ms, 1.5s, 1m30s, 2h.\n"
    "Connection: --url mysql://user[:password]@host:port[,host:port...]/database[?table=T&...]\n"
    "or DLOCK_URL; the password may instead come from DLOCK_PASSWORD or\n"
    "--password-file (so it need not appear in ps). TLS: the --ssl-* options (or\n"
    "DLOCK_SSL_MODE, DLOCK_SSL_CA, ..., or ssl_mode=, ssl_ca=, ... in the URL).";

struct Global {
  std::string url;
  std::string table;
  std::string password_file;
  bool verbose = false;
  // --ssl-mode, --ssl-ca, ...: each replaces the URL's parameter of that
  // name when given (Options::ssl_mode, ...).
  Options tls;
};

// The TLS options of the command: name, environment variable, the field
// of Global::tls it fills, and its help.
struct TlsFlag {
  const char* flag;
  const char* env;
  std::string Options::*field;
  const char* help;
};
constexpr TlsFlag kTlsFlags[] = {
    {"--ssl-mode", "DLOCK_SSL_MODE", &Options::ssl_mode,
     "disabled, preferred, required, verify_ca or verify_identity (default: verify_identity with --ssl-ca or "
     "--ssl-capath, else preferred)"},
    {"--ssl-ca", "DLOCK_SSL_CA", &Options::ssl_ca, "PEM file of the certificate authorities to trust"},
    {"--ssl-capath", "DLOCK_SSL_CAPATH", &Options::ssl_capath, "directory of trusted CA certificates (openssl rehash)"},
    {"--ssl-cert", "DLOCK_SSL_CERT", &Options::ssl_cert, "PEM client certificate (with --ssl-key)"},
    {"--ssl-key", "DLOCK_SSL_KEY", &Options::ssl_key, "PEM private key of --ssl-cert"},
    {"--ssl-crl", "DLOCK_SSL_CRL", &Options::ssl_crl, "PEM certificate revocation list"},
    {"--ssl-cipher", "DLOCK_SSL_CIPHER", &Options::ssl_cipher, "permitted ciphers, OpenSSL names separated by ':'"},
};

// The password when the URL has none: --password-file (its first line), else
// DLOCK_PASSWORD. A password in the URL wins.
std::string password_from(const Global& g) {
  if (!g.password_file.empty()) {
    std::ifstream in(g.password_file);
    if (!in) throw std::invalid_argument("cannot read --password-file " + g.password_file);
    std::string line;
    std::getline(in, line);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    return line;
  }
  const char* env = std::getenv("DLOCK_PASSWORD");
  return env != nullptr ? env : "";
}

Options resolve_options(const Global& g) {
  if (g.url.empty()) throw std::invalid_argument("no database: pass --url mysql://... or set DLOCK_URL");
  Options o = Options::from_url(g.url);
  if (!g.table.empty()) o.table = g.table;
  if (o.password.empty()) o.password = password_from(g);
  for (const auto& flag : kTlsFlags)
    if (!(g.tls.*flag.field).empty()) o.*flag.field = g.tls.*flag.field;
  details::validate_options(o);
  return o;
}

void validate_names(const std::vector<std::string>& names) {
  for (const auto& n : names) details::validate_name(n);
}

// What follows the options of `run` and `elect` (`verb`): NAME, then the
// command (its own options included; a `--` right after NAME is dropped),
// or only NAME with -c (`shell_command`, run through `sh -c`). `what`
// names NAME in messages ("lock", "election"). Throws std::invalid_argument.
void split_name_and_command(const std::string& verb, const std::string& what, std::vector<std::string> rest,
                            const std::string& shell_command, std::string& name, std::vector<std::string>& command) {
  if (rest.empty() || rest.front() == "--")
    throw std::invalid_argument(verb + ": a" + (what[0] == 'e' ? "n " : " ") + what +
                                " name is needed before the command (dlock " + verb + " NAME COMMAND...)");
  // Option parsing stops at the first word it does not know: that must be
  // the name, not a mistyped option.
  if (rest.front().size() > 1 && rest.front()[0] == '-')
    throw std::invalid_argument(verb + ": unknown option " + rest.front() + " (the " + what +
                                " name comes after the options)");
  name = rest.front();
  rest.erase(rest.begin());
  if (!rest.empty() && rest.front() == "--") rest.erase(rest.begin());
  if (!shell_command.empty()) {
    if (!rest.empty()) throw std::invalid_argument(verb + ": -c takes the whole command; give only NAME after it");
    rest = {"sh", "-c", shell_command};
  }
  if (rest.empty()) throw std::invalid_argument(verb + ": no command to run after the " + what + " name " + name);
  command = std::move(rest);
  validate_names({name});
}

void setup_logging(bool verbose) {
  // Colours only on a terminal (spdlog's automatic mode checks isatty).
  auto logger = spdlog::stderr_color_mt("dlock", spdlog::color_mode::automatic);
  // The library's messages start with "dlock: " already.
  logger->set_pattern("%v");
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
  app.add_option("--password-file", g.password_file,
                 "read the password from the first line of this file (when the URL has none)");
  for (const auto& flag : kTlsFlags)
    app.add_option(flag.flag, g.tls.*flag.field, flag.help)->envname(flag.env)->group("TLS to the database");
  app.set_version_flag("-V,--version", std::string("dlock ") + DLOCK_VERSION_STRING);

  RunArgs run;
  std::string wait_text, lease_text, kill_after_text = "10s", check_text = "1s";
  bool no_wait = false;
  std::string shell_command;
  auto* run_cmd = app.add_subcommand("run", "hold a lock while a command runs (like flock(1))");
  // flock's shape: options, then NAME, then the command with its own
  // options (`dlock run x ls -d /tmp`); a `--` after NAME is allowed.
  run_cmd->prefix_command();
  run_cmd->fallthrough(false);  // what follows NAME stays the command's
  auto* wait_opt = run_cmd->add_option("-w,--wait", wait_text,
                                       "give up after this long: seconds (5, 0.5) or 500ms, 1m30s (default: forever)");
  run_cmd->add_flag("-n,--nonblock,--no-wait", no_wait, "one attempt; do not wait")->excludes(wait_opt);
  run_cmd->add_option("--lease", lease_text, "fixed lease, no renewal (default: watchdog-renewed lease)");
  auto* permits_opt = run_cmd->add_option("--permits", run.permits,
                                          "hold one permit of semaphore NAME with this bound (1..100000) instead of lock NAME")
                          ->check(CLI::Range(1, 100000));
  bool run_shared = false, run_exclusive = false;
  auto* shared_opt = run_cmd->add_flag("-s,--shared", run_shared,
                                       "hold the read side of read-write lock NAME instead of lock NAME (flock -s)");
  auto* exclusive_opt = run_cmd->add_flag("-x,--exclusive", run_exclusive,
                                          "hold the write side of read-write lock NAME instead of lock NAME (flock -x)");
  bool run_fair = false;
  auto* fair_opt = run_cmd->add_flag("--fair", run_fair,
                                     "hold fair lock NAME instead of lock NAME (waiters are granted in arrival order)");
  std::string at_least_text;
  run_cmd
      ->add_option("--at-least", at_least_text,
                   "once the command has run, keep NAME taken until this long after it was acquired (by the "
                   "database's clock), so a job cron starts on several hosts runs once per slot; not with --permits")
      ->excludes(permits_opt);
  shared_opt->excludes(exclusive_opt)->excludes(permits_opt)->excludes(fair_opt);
  exclusive_opt->excludes(permits_opt)->excludes(fair_opt);
  fair_opt->excludes(permits_opt);
  run_cmd->add_option("-E,--conflict-exit-code", run.conflict_exit_code,
                      "exit code when the lock is not had (default 1)")
      ->check(CLI::Range(0, 255));
  run_cmd->add_option("-c,--command", shell_command, "run this through `sh -c` (then give only NAME)");
  run_cmd->add_option("--kill-after", kill_after_text, "grace between SIGTERM and SIGKILL on a lost lock (default 10s)");
  run_cmd->add_option("--check-interval", check_text, "how often the hold is confirmed while the command runs (default 1s)");
  run_cmd->footer(
      "Usage: dlock run [OPTIONS] NAME COMMAND [ARGS...]\n"
      "       dlock run [OPTIONS] -c 'SHELL COMMAND' NAME\n"
      "Everything after NAME is the command, its options included (a `--` right after NAME\n"
      "is dropped). The command gets DLOCK_NAME, DLOCK_FENCE (the fencing token) and\n"
      "DLOCK_GUARD_SQL (a statement to run last in a transaction on the same database: it\n"
      "fails unless the hold is live) in its environment (with --permits: DLOCK_FENCE is\n"
      "the slot's token, DLOCK_SLOT the slot;\n"
      "with --shared: the read hold's token)\n"
      "and runs in a process group of its own; SIGINT, SIGTERM and SIGHUP sent\n"
      "to dlock are forwarded to that group. Exit 126/127: the command is not executable /\n"
      "not found.\n"
      "Cron on several hosts: `dlock run -n --at-least 50s NAME job` (started every minute\n"
      "on each host) runs the job once per minute, however fast it ends and however the\n"
      "hosts' clocks differ by less than 10s.");

  RunArgs elect;
  elect.elect = true;
  std::string elect_wait_text, elect_kill_after_text = "10s", elect_check_text = "1s", elect_shell_command;
  bool elect_no_wait = false;
  auto* elect_cmd = app.add_subcommand("elect", "campaign in an election and run a command while leader");
  elect_cmd->prefix_command();
  elect_cmd->fallthrough(false);
  auto* elect_wait_opt = elect_cmd->add_option("-w,--wait", elect_wait_text,
                                               "give up campaigning after this long (default: forever)");
  elect_cmd->add_flag("-n,--nonblock,--no-wait", elect_no_wait, "one attempt; do not wait")->excludes(elect_wait_opt);
  elect_cmd->add_option("--value", elect.value, "what the leader proclaims (up to 64 KiB; default: empty)");
  elect_cmd->add_option("-E,--conflict-exit-code", elect.conflict_exit_code,
                        "exit code when not leader in time (default 1)")
      ->check(CLI::Range(0, 255));
  elect_cmd->add_option("-c,--command", elect_shell_command, "run this through `sh -c` (then give only NAME)");
  elect_cmd->add_option("--kill-after", elect_kill_after_text,
                        "grace between SIGTERM and SIGKILL on a lost leadership (default 10s)");
  elect_cmd->add_option("--check-interval", elect_check_text,
                        "how often the leadership is confirmed while the command runs (default 1s)");
  elect_cmd->footer(
      "Usage: dlock elect [OPTIONS] NAME COMMAND [ARGS...]\n"
      "       dlock elect [OPTIONS] -c 'SHELL COMMAND' NAME\n"
      "Waits until leader of election NAME, runs the command with DLOCK_NAME, DLOCK_TERM\n"
      "and DLOCK_FENCE (both the term, a fencing token) and DLOCK_GUARD_SQL in its\n"
      "environment, and resigns when\n"
      "it exits, so a candidate elsewhere takes over at once. A leadership lost meanwhile\n"
      "stops the command as `dlock run` does (exit 200). A leader that dies is replaced once\n"
      "its lease ends.");
  std::string leader_name;
  bool leader_json = false, leader_watch = false;
  auto* leader_cmd = app.add_subcommand("leader", "show who leads an election (value, term, host, pid, since)");
  leader_cmd->add_option("name", leader_name, "election name")->required();
  leader_cmd->add_flag("--json", leader_json, "one JSON object per line");
  leader_cmd->add_flag("--watch", leader_watch, "print one line per change until interrupted");
  bool json = false;
  std::vector<std::string> status_names;
  auto* status_cmd = app.add_subcommand(
      "status", "show every hold (locks, fair locks, semaphore permits, read and write holds, leaderships) and the "
                "waiters in fair lock queues, or those of the named names; WAITERS counts the waiters the database "
                "shows (a fair lock's queue; else 1 when another client marked the hold as waited for)");
  status_cmd->add_flag("--json", json, "one JSON object per line");
  bool status_hex = false;
  status_cmd->add_flag("--hex", status_hex, "the names are given in hex (the name_hex of status --json)");
  status_cmd->add_option("names", status_names, "names (default: every held name)");

  TopArgs top;
  std::vector<std::string> top_kinds;
  std::string top_interval_text = "1s";
  bool top_hex = false;
  auto* top_cmd = app.add_subcommand(
      "top", "a live view of the holds, longest held first, refreshed until interrupted (SIGINT, SIGTERM, SIGHUP); "
             "in a pipe the views follow one another without escape codes");
  top_cmd->add_flag("--once", top.once, "print one view and exit");
  top_cmd->add_flag("--json", top.json, "one JSON object per view and line");
  long long top_limit = 50;
  top_cmd->add_option("--limit", top_limit, "most holds (and fair lock waiters) shown, 0..1000000; 0: all (default 50)")
      ->check(CLI::Range(0LL, 1'000'000LL));
  top_cmd->add_option("--kind", top_kinds, "only this kind: lock, fair, semaphore, write, read, election (repeatable)");
  top_cmd->add_option("--interval", top_interval_text, "time between views (default 1s)");
  top_cmd->add_flag("--hex", top_hex, "the names are given in hex (the name_hex of status --json)");
  top_cmd->add_option("names", top.names, "names (default: every name)");

  std::vector<std::string> force_names;
  auto* force_cmd = app.add_subcommand("force-unlock", "clear the holders of the named locks");
  force_cmd->add_option("names", force_names, "lock names")->required();
  bool force_hex = false;
  ForceTarget force_target;
  bool force_rw = false;
  auto* force_sem_opt =
      force_cmd->add_flag("--semaphore", force_target.semaphores, "the names are semaphores: free every live permit of each");
  auto* force_shared_opt = force_cmd->add_flag(
      "-s,--shared", force_target.reads, "the names are read-write locks: clear every read hold of each");
  auto* force_exclusive_opt = force_cmd->add_flag(
      "-x,--exclusive", force_target.writes, "the names are read-write locks: clear the write hold of each");
  force_cmd->add_flag("--read-write", force_rw, "the names are read-write locks: clear every hold of each (-s and -x)")
      ->excludes(force_sem_opt);
  auto* force_fair_opt = force_cmd->add_flag(
      "--fair", force_target.fair, "the names are fair locks: clear the holder of each (its first waiter goes next)");
  auto* force_election_opt = force_cmd->add_flag("--election", force_target.elections,
                                                 "the names are elections: end the leadership of each (a candidate "
                                                 "takes it)");
  force_sem_opt->excludes(force_shared_opt)->excludes(force_exclusive_opt);
  for (auto* kind : {force_fair_opt, force_election_opt}) {
    kind->excludes(force_sem_opt)->excludes(force_shared_opt)->excludes(force_exclusive_opt)->excludes("--read-write");
  }
  force_fair_opt->excludes(force_election_opt);
  force_cmd->add_flag("--hex", force_hex, "the names are given in hex (the name_hex of status --json)");

  bool print_sql = false;
  auto* init_cmd = app.add_subcommand("init", "create the lock, semaphore and read-write lock tables (idempotent)");
  init_cmd->add_flag("--print-sql", print_sql, "print the CREATE TABLE statements instead of running them");

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
      split_name_and_command("run", "lock", run_cmd->remaining(), shell_command, run.name, run.command);
      if (run_shared) run.side = details::LockSide::kRead;
      if (run_exclusive) run.side = details::LockSide::kWrite;
      if (run_fair) run.side = details::LockSide::kFair;
      if (no_wait) run.wait = Millis::zero();
      if (!wait_text.empty()) run.wait = parse_duration(wait_text, true);
      if (!lease_text.empty()) run.lease = parse_duration(lease_text);
      if (!at_least_text.empty()) {
        run.at_least = parse_duration(at_least_text, true);
        details::validate_held_for(run.at_least);
      }
      run.kill_after = parse_duration(kill_after_text, true);
      run.check_interval = parse_duration(check_text);
      return run_command(options, run);
    }
    if (elect_cmd->parsed()) {
      split_name_and_command("elect", "election", elect_cmd->remaining(), elect_shell_command, elect.name,
                             elect.command);
      if (elect.value.size() > 64 * 1024) throw std::invalid_argument("elect: --value is at most 64 KiB");
      if (elect_no_wait) elect.wait = Millis::zero();
      if (!elect_wait_text.empty()) elect.wait = parse_duration(elect_wait_text, true);
      elect.kill_after = parse_duration(elect_kill_after_text, true);
      elect.check_interval = parse_duration(elect_check_text);
      return run_command(options, elect);
    }
    if (leader_cmd->parsed()) {
      validate_names({leader_name});
      return leader_command(options, leader_name, leader_json, leader_watch);
    }
    if (status_cmd->parsed()) {
      if (status_hex)
        for (auto& n : status_names) n = from_hex(n);
      validate_names(status_names);
      return status_command(options, status_names, json);
    }
    if (top_cmd->parsed()) {
      if (top_hex)
        for (auto& n : top.names) n = from_hex(n);
      validate_names(top.names);
      for (const auto& k : top_kinds) {
        const auto type = parse_hold_type(k);
        if (!type) throw std::invalid_argument("top: unknown --kind \"" + k + "\" (lock, fair, semaphore, write, read, election)");
        top.types.push_back(*type);
      }
      top.limit = static_cast<std::size_t>(top_limit);
      top.interval = parse_duration(top_interval_text);
      if (top.interval < Millis(100)) throw std::invalid_argument("top: --interval is at least 100ms");
      return top_command(options, top);
    }
    if (force_cmd->parsed()) {
      if (force_hex)
        for (auto& n : force_names) n = from_hex(n);
      validate_names(force_names);
      if (force_rw) force_target.reads = force_target.writes = true;
      return force_unlock_command(options, force_names, force_target);
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
