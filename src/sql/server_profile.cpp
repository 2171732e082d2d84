#include "sql/server_profile.hpp"

#include <cppconn/resultset.h>
#include <cppconn/statement.h>
#include <mysql_connection.h>

#include <memory>

#include "dlock/errors.hpp"
#include "sql/connection.hpp"

namespace dlock::details {

namespace {

// The Value column of a one-row SHOW ... LIKE, or "" if the server has no
// such variable (MySQL and MariaDB without wsrep have no wsrep_on).
std::string show_value(sql::Statement& st, const char* query) {
  std::unique_ptr<sql::ResultSet> rs(st.executeQuery(query));
  return rs->next() ? std::string(rs->getString(2)) : std::string();
}

}  // namespace

ServerProfile ServerProfile::detect(sql::Connection& connection) {
  std::unique_ptr<sql::Statement> st(connection.createStatement());
  ServerProfile profile;
  profile.galera = show_value(*st, "SHOW VARIABLES LIKE 'wsrep\\_on'") == "ON";
  if (profile.galera && show_value(*st, "SHOW STATUS LIKE 'wsrep\\_ready'") != "ON") {
    throw BackendError("the Galera node is not ready for clients (wsrep_ready is OFF: it is not synced "
                       "into the cluster's primary component)",
                       mysql_error::kWsrepNotReady, "08S01");
  }
  return profile;
}

std::string ServerProfile::session_settings() const { return galera ? ", wsrep_sync_wait = 1" : ""; }

}  // namespace dlock::details
