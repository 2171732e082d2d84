// What kind of server a connection talks to, found out once at connect, and
// everything the library does differently because of it. The rest of the
// code asks the profile; it never tests for a server kind itself.
//
// Two kinds today:
// - a single server (MySQL 8.0, MariaDB 10.6+, or a replication primary);
// - a Galera node (wsrep_on = ON): a write commits only after the cluster
//   certified it, a node that is not in the primary component refuses
//   statements with 1047, and reads may lag writes applied elsewhere.
#pragma once

#include <string>

namespace sql {
class Connection;
}  // namespace sql

namespace dlock::details {

struct ServerProfile {
  // wsrep_on = ON: the server is a Galera node.
  bool galera = false;

  // Finds out what `connection` talks to (one SHOW statement, two on a
  // Galera node). Throws BackendError for a server that cannot take locks:
  // code 1290 for a read-only one (read_only or super_read_only ON, such as
  // a replica), 1047 for a Galera node not ready for clients (not synced
  // into the primary component). A client with failover servers then moves
  // on to the next one. Throws sql::SQLException for a failing statement.
  static ServerProfile detect(sql::Connection& connection);

  // Extra assignments for the session's SET statement ("" if none). On
  // Galera: wsrep_sync_wait = 1, so every read (a poll, an introspection
  // call, the read that reconciles a statement whose outcome is unknown)
  // first waits until this node has applied every write the cluster
  // committed before it. Writes are unaffected: their conflicts are decided
  // by certification. The uncontended lock cycle has no read, so it pays
  // nothing; a read pays one round of the group's messages.
  std::string session_settings() const;

  // A statement refused with 1213 is rolled back and may run again. On one
  // server that is a deadlock, retried a few times; on Galera it is also a
  // certification conflict with a write committed through another node (the
  // multi-writer setup), which can repeat as long as that node keeps
  // writing: retried for as long as the caller's time budget allows, not a
  // fixed number of times.
  int deadlock_retry_limit() const { return galera ? 1'000'000 : 8; }
};

}  // namespace dlock::details
