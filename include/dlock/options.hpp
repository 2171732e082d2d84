// dlock/options.hpp
//
// `dlock::Options` says where the lock table lives and how a
// `DatabaseDistributedLock` behaves: lease length, polling, pool size and
// timeouts. Every field has a usable default except the account and database.
// `Options::from_url` builds one from a `mysql://` URL, the form the `dlock`
// command and most configuration files use.
//
// Validation: fields are checked when a `DatabaseDistributedLock` is
// constructed, before any connection is made; a bad value throws
// `std::invalid_argument` naming the field.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "dlock/export.hpp"

namespace spdlog {
class logger;
}

namespace dlock {

using Millis = std::chrono::milliseconds;

struct DLOCK_API Options {
  // ---- Where the database is -------------------------------------------

  // Server address. Default "127.0.0.1". "localhost" makes the client library
  // use its default Unix socket instead of TCP.
  std::string host = "127.0.0.1";
  // TCP port. Default 3306. Must be 1..65535.
  unsigned port = 3306;
  // One more server of the same cluster: host and TCP port, checked like
  // `host` and `port`.
  struct Server {
    std::string host;
    unsigned port = 3306;
  };
  // Further servers of the same cluster (Galera nodes, or a standby that
  // takes over the primary's address space), in the order to try them.
  // Default empty: one server. The client writes through one server at a
  // time (the single-writer setup, see README "On a Galera cluster"): it
  // starts on host:port and moves to the next server only when a new
  // connection to the current one cannot be made (refused, timed out, or a
  // Galera node that is not ready for clients: error 1047); after the last
  // it tries the first again. It never moves back on its own while the
  // server it left may still take writes. Each move is logged, and every
  // waiter of the client retries at once on the new server. At most 15
  // entries (16 servers in all); no host empty, every port 1..65535. In a
  // URL: mysql://user:password@h1:3306,h2:3306,h3/db.
  std::vector<Server> failover_servers;
  // Account. Default empty (the server's anonymous account, rarely wanted).
  std::string user;
  std::string password;
  // Schema that holds the lock table. Required: empty is rejected.
  std::string database;
  // Lock table name: letters, digits, '_' and '$', 1..64 characters (it is an
  // identifier, so it cannot be a bound parameter; anything else is rejected).
  // Default "distributed_lock".
  std::string table = "distributed_lock";

  // ---- TLS to the database (docs/security.md) ----------------------------
  //
  // Named as the mysql client's options; URL parameters of the same names.
  // Every connection of the client (pool, watchdog, wake-up, introspection,
  // every server of failover_servers) and of the `dlock` command uses them.

  // How the connection is encrypted, and what is checked:
  //   "disabled"         never TLS.
  //   "preferred"        TLS when the server offers it, else plaintext;
  //                      the certificate is not checked (unless ssl_ca is
  //                      given: then its chain is).
  //   "required"         TLS or no connection; the certificate is not
  //                      checked. Refuses a server without TLS.
  //   "verify_ca"        "required", and the server's certificate must be
  //                      signed by ssl_ca / ssl_capath (one of them needed).
  //   "verify_identity"  "verify_ca", and the certificate must name the host
  //                      connected to (host, or a failover server's host).
  //                      Without ssl_ca / ssl_capath: the system's trust store.
  // Default empty: "verify_identity" when ssl_ca or ssl_capath is given (a
  // CA named means a server to check), else "preferred" (as the mysql
  // client: encrypted wherever the server allows, never a connection lost to
  // a server without TLS). Upper case is accepted too. `required` and the
  // verifying modes never fall back to plaintext: a server that cannot meet
  // the mode, or whose certificate fails the check, is a BackendError naming
  // the host. With "disabled", no other ssl_ field may be set.
  std::string ssl_mode;
  // PEM file of the certificate authorities to trust. Default empty. Must be
  // a readable file.
  std::string ssl_ca;
  // Directory of trusted CA certificates in OpenSSL's hashed layout
  // (`openssl rehash DIR`). Default empty. Must be a readable directory.
  std::string ssl_capath;
  // PEM client certificate and its private key, for accounts that require
  // one (REQUIRE X509 / SUBJECT / ISSUER). Default empty. Both or neither;
  // each a readable file.
  std::string ssl_cert;
  std::string ssl_key;
  // PEM certificate revocation list: a server certificate it lists is
  // refused. Default empty. Must be a readable file.
  std::string ssl_crl;
  // Permitted ciphers, OpenSSL's names separated by ':' (TLS 1.3 suites such
  // as TLS_AES_128_GCM_SHA256; TLS 1.2 names apply to TLS 1.2 connections).
  // Default empty: the TLS library's defaults. No cipher in common: no
  // connection (BackendError).
  std::string ssl_cipher;

  // ---- Behaviour ---------------------------------------------------------

  // Lease used when the caller gives none; the watchdog renews such holds
  // every watchdog_timeout / 3. Default 30 s. Must be >= 3 ms and <= 365 days.
  Millis watchdog_timeout{30'000};
  // How often the rows that local waiters wait on are checked, in one
  // statement per tick, while anyone waits. Default 1 s. Must be > 0. It
  // bounds how late a release by another client is noticed when no bell
  // rings (fast_wakeup off, or the holder's session has none): the safety net.
  Millis poll_interval{1'000};
  // Pooled connections for callers' operations. Default 8; must be >= 1. The
  // watchdog and poller use one more connection of their own. Also the
  // number of worker threads that run asynchronous operations' statements
  // (<dlock/asio.hpp>), started by the first asynchronous call; pending
  // asynchronous waits take no thread.
  std::size_t pool_size = 8;
  // TCP connect and handshake timeout. Default 5 s; must be > 0. The client
  // library counts whole seconds, so it is rounded up to a second.
  Millis connect_timeout{5'000};
  // Read/write timeout of every statement, and the longest a caller waits for
  // a pooled connection. Default 10 s; must be > 0; rounded up to a second.
  Millis io_timeout{10'000};
  // CREATE TABLE IF NOT EXISTS at construction. Default true. Turn it off
  // where the account has no DDL rights and the table is applied by a DBA
  // (sql/schema.sql, or `dlock init --print-sql`).
  bool create_table = true;
  // A label for this client instance, written into the rows it holds and
  // shown to operators (`dlock status`). Default empty: generated as
  // host-pid-random. It is not the identity: two client instances are always
  // distinct owners, even with the same machine_id, in one process or in
  // two (every hold carries a random hold id of its own). 1..64 bytes, no NUL.
  std::string machine_id;
  // Wake waiters in other clients within about a millisecond of a release,
  // instead of at their next poll. Default true. Each pooled session holds
  // a MySQL user-level lock of its own (a "bell", GET_LOCK); a release of a
  // hold that someone waits for gives the bell back in its own statement, so
  // the server wakes the waiter. A waiting client blocks one of a few
  // dedicated connections in GET_LOCK: on the holder's bell when it is next,
  // otherwise in the name's line (lock) or behind the queue entry before its
  // own (fair lock), so a release wakes one client however many wait
  // (semaphore, read-write lock and election waiters all watch the bell).
  // The lock row stays the only truth: a ring is only a hint to try again,
  // and the poller keeps running as the safety net. Adds no statement to an
  // uncontended lock/unlock. Turn it off where user-level locks are
  // not available or not shared between sessions (some proxies and load
  // balancers, a Galera cluster written through several nodes at once) or
  // where statement-based binary logging would warn about GET_LOCK; waiters
  // then rely on poll_interval alone.
  // Clients with it on and off can share a table: a holder without a
  // bell only costs its waiters the poll.
  bool fast_wakeup = true;
  // Most dedicated connections (and threads) a client blocks in GET_LOCK at
  // once, one per waited-for name (up to three for a name whose holds ring
  // several bells); names beyond that are left to the poller
  // until a connection frees up. Opened on first need, closed after 60 s
  // unused. Default 4; must be 1..256. Ignored when fast_wakeup is false.
  std::size_t wakeup_connections = 4;
  // Counting for metrics() (<dlock/metrics.hpp>): relaxed atomic counters
  // and histograms, no I/O. Default true; false leaves every metric at 0.
  bool metrics = true;
  // Logger. Default empty: the spdlog logger registered as "dlock", created
  // (stderr, level info) if absent.
  std::shared_ptr<spdlog::logger> logger;
  // Called when a hold is found lost: its local deadline passed (renewals did
  // not get through, or a fixed lease ran out before unlock()), or it was
  // taken over or force-unlocked. Once per lost hold, within 100 ms of the
  // local deadline whatever the database or the network does (from the
  // client's clock thread, which runs no database work), and before the
  // server lets another owner take the hold. Default empty: a warning is
  // logged either way. Must not block for long (the next loss waits for
  // it); exceptions it throws are logged and swallowed.
  std::function<void(std::string_view name, std::uint64_t fence)> on_lock_lost;

  // mysql://user:password@host:port[,host:port...]/database?table=T&pool_size=N
  //   &watchdog_timeout_ms=N&poll_interval_ms=N&connect_timeout_ms=N&io_timeout_ms=N
  // Also accepted: `mariadb://`, `create_table=true|false|1|0`, `machine_id=S`,
  // `fast_wakeup=true|false|1|0`, `wakeup_connections=N`, `metrics=true|false|1|0`,
  // `ssl_mode=M`, `ssl_ca=FILE`, `ssl_capath=DIR`, `ssl_cert=FILE`, `ssl_key=FILE`,
  // `ssl_crl=FILE`, `ssl_cipher=LIST`,
  // an IPv6 host in brackets, and a missing port (3306) or password.
  // Percent-decoding in user, password, database and parameter values.
  // Throws std::invalid_argument on a malformed URL, an unknown or repeated
  // parameter, a number out of range, or a TLS file that cannot be read; the
  // message names the problem (never the password).
  static Options from_url(std::string_view url);
};

}  // namespace dlock
