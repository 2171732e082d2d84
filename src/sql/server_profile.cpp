#include "sql/server_profile.hpp"

#include <cppconn/resultset.h>
#include <cppconn/statement.h>
#include <mysql_connection.h>

#include <memory>

#include "dlock/errors.hpp"
#include "sql/connection.hpp"

namespace dlock::details {

ServerProfile ServerProfile::detect(sql::Connection& connection) {
  std::unique_ptr<sql::Statement> st(connection.createStatement());
  ServerProfile profile;
  bool read_only = false;
  {
    // One statement for all three (MariaDB has no super_read_only, and
    // a server without Galera no wsrep_on: absent means off).
    std::unique_ptr<sql::ResultSet> rs(st->executeQuery(
        "SHOW GLOBAL VARIABLES WHERE Variable_name IN ('wsrep_on', 'read_only', 'super_read_only')"));
    while (rs->next()) {
      const std::string name = rs->getString(1);
      const bool on = rs->getString(2) == "ON";
      if (name == "wsrep_on") profile.galera = on;
      if (name != "wsrep_on" && on) read_only = true;
    }
  }
  // A replica in the server list is refused like an unreachable server, so
  // a client with failover servers moves on instead of failing every write.
  if (read_only) {
    throw BackendError("the server is read-only (read_only or super_read_only is ON: a replica?)",
                       mysql_error::kReadOnly, "HY000");
  }
  if (profile.galera) {
    std::unique_ptr<sql::ResultSet> rs(st->executeQuery("SHOW STATUS LIKE 'wsrep\\_ready'"));
    if (!rs->next() || rs->getString(2) != "ON") {
      throw BackendError("the Galera node is not ready for clients (wsrep_ready is OFF: it is not synced "
                         "into the cluster's primary component)",
                         mysql_error::kWsrepNotReady, "08S01");
    }
  }
  return profile;
}

std::string ServerProfile::session_settings() const { return galera ? ", wsrep_sync_wait = 1" : ""; }

}  // namespace dlock::details
