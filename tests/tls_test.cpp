// TLS to the database (Options::ssl_mode and the ssl_ files), against the
// TLS-only test server (scripts/db.sh --tls: require_secure_transport=ON, a
// throwaway CA, a server certificate for localhost / 127.0.0.1 / ::1, also
// reachable as 127.0.0.2) and, for a server without TLS, the plain one.
#include <dlock/asio.hpp>
#include <dlock/dlock.hpp>
#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <cppconn/connection.h>
#include <cppconn/resultset.h>
#include <cppconn/statement.h>

#include <boost/asio/use_future.hpp>

#include <atomic>
#include <fstream>
#include <future>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "sql/connection.hpp"
#include "test_env.hpp"

namespace dlock {
namespace {

using namespace std::chrono_literals;

std::string cert(const std::string& file) { return test::tls_certificates() + "/" + file; }

// Options for the TLS server with a table of this test's own.
Options tls_options(const std::string& parameters = "") {
  Options o = Options::from_url(test::tls_database_url() + (parameters.empty() ? "" : "&" + parameters));
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  o.table = "tls_" + std::to_string(std::hash<std::string>{}(info->name()) % 100'000'000);
  o.watchdog_timeout = 1500ms;
  o.poll_interval = 200ms;
  o.io_timeout = 5s;
  o.connect_timeout = 3s;
  return o;
}

// The same server and account, TLS settings replaced.
Options with_tls(Options o, const std::string& mode, const std::string& ca) {
  o.ssl_mode = mode;
  o.ssl_ca = ca;
  return o;
}

// What a client built from `o` fails with at construction ("" if it does not).
std::string construction_error(const Options& o) {
  try {
    DatabaseDistributedLock client(o);
    return "";
  } catch (const BackendError& e) {
    return std::string("BackendError ") + std::to_string(e.code()) + ": " + e.what();
  }
}

// Rows of a query on the TLS server, every column as text, tab-separated.
std::vector<std::string> tls_rows(const std::string& sql) {
  auto c = details::Connection::open(details::ConnectionSettings::from(Options::from_url(test::tls_database_url())));
  std::unique_ptr<sql::Statement> st(c->raw_for_session_change().createStatement());
  std::unique_ptr<sql::ResultSet> rs(st->executeQuery(sql));
  const unsigned columns = rs->getMetaData()->getColumnCount();
  std::vector<std::string> out;
  while (rs->next()) {
    std::string row;
    for (unsigned i = 1; i <= columns; ++i) row += (i > 1 ? "\t" : "") + std::string(rs->isNull(i) ? "" : rs->getString(i));
    out.push_back(row);
  }
  return out;
}

TEST(Tls, EveryPrimitiveWorksWithVerifyIdentityAndTheTestCa) {
  const Options o = tls_options();
  ASSERT_EQ(o.ssl_mode, "verify_identity");
  DatabaseDistributedLock client(o);
  EXPECT_FALSE(client.inspect().tls_cipher.empty()) << "the session is encrypted";

  client.lock("plain");
  EXPECT_GT(client.fencing_token("plain"), 0u);
  client.unlock("plain");

  Lock fair = client.get_fair_lock("fair");
  fair.lock();
  EXPECT_TRUE(fair.is_held_by_current_thread());
  fair.unlock();

  Semaphore semaphore = client.get_semaphore("permits", 2);
  {
    Permit permit = semaphore.acquire();
    EXPECT_EQ(semaphore.available_permits(), 1u);
  }

  ReadWriteLock rw = client.get_read_write_lock("catalog");
  rw.lock_shared();
  rw.unlock_shared();
  rw.lock();
  rw.unlock();

  MultiLock both = client.get_multi_lock({"a", "b"});
  both.lock();
  EXPECT_GT(both.fencing_token("a"), 0u);
  both.unlock();

  Election election = client.get_election("leader", Owner::create());
  EXPECT_GT(election.campaign("me"), 0u);
  EXPECT_EQ(election.leader().leader->value, "me");
  election.resign();

  const Lock async = client.get_lock("async", Owner::create());
  async_lock(async, boost::asio::use_future).get();
  EXPECT_TRUE(async.is_held_by_current_thread());
  async_unlock(async, boost::asio::use_future).get();
}

TEST(Tls, EverySessionOfTheClientIsEncryptedServerSide) {
  // An account of this test's own, so its sessions can be told apart.
  const std::string user = "dlock_tls_proof";
  test::execute_tls_sql("CREATE USER IF NOT EXISTS '" + user + "'@'127.0.0.1' IDENTIFIED BY 'k'");
  test::execute_tls_sql("GRANT ALL PRIVILEGES ON *.* TO '" + user + "'@'127.0.0.1'");
  Options o = tls_options();
  o.user = user;
  o.password = "k";
  o.watchdog_timeout = 600ms;  // renewals every 200 ms: the watchdog's session
  o.fast_wakeup = true;        // a waiter's wake-up session
  DatabaseDistributedLock other(tls_options());
  DatabaseDistributedLock client(o);
  other.lock("busy");
  client.lock("mine");
  std::thread waiter([&] {
    if (client.try_lock("busy", 30s)) client.unlock("busy");
  });
  const std::string sessions =
      "SELECT t.PROCESSLIST_ID, COALESCE(s.VARIABLE_VALUE, ''), COALESCE(p.INFO, '') FROM performance_schema.threads t "
      "LEFT JOIN performance_schema.status_by_thread s ON s.THREAD_ID = t.THREAD_ID AND s.VARIABLE_NAME = 'Ssl_cipher' "
      "LEFT JOIN information_schema.PROCESSLIST p ON p.ID = t.PROCESSLIST_ID "
      "WHERE t.PROCESSLIST_USER = '" + user + "'";
  // Pool (the holder's and the waiter's statements), watchdog, wake-up.
  const bool all_there = test::wait_until(
      [&] {
        const auto rows = tls_rows(sessions);
        bool bell_wait = false;
        for (const auto& r : rows) bell_wait = bell_wait || r.find("IS_FREE_LOCK") != std::string::npos;
        return bell_wait && rows.size() >= 3 && client.metrics().of(MetricKind::kLock).renewals >= 1;
      },
      20s);
  const auto rows = tls_rows(sessions);
  other.unlock("busy");
  waiter.join();
  client.unlock("mine");
  ASSERT_TRUE(all_there) << "sessions seen: " << rows.size() << ", renewals " << client.metrics().of(MetricKind::kLock).renewals;
  for (const auto& r : rows) {
    const auto tab = r.find('\t');
    const std::string cipher = r.substr(tab + 1, r.find('\t', tab + 1) - tab - 1);
    EXPECT_FALSE(cipher.empty()) << "session without TLS: " << r;
  }
}

TEST(Tls, AClientThatAsksForPlaintextIsRefusedWithAClearError) {
  const std::string error = construction_error(with_tls(tls_options(), "disabled", ""));
  ASSERT_NE(error, "") << "the server requires secure transport";
  EXPECT_NE(error.find("127.0.0.1:33307"), std::string::npos) << error;
  EXPECT_NE(error.find("ssl_mode disabled"), std::string::npos) << error;
  EXPECT_NE(error.find("not encrypted"), std::string::npos) << error;
}

TEST(Tls, AServerSignedByAnotherCaIsRefusedNeverUsedInPlaintext) {
  for (const char* mode : {"verify_identity", "verify_ca", "required", "preferred"}) {
    const std::string error = construction_error(with_tls(tls_options(), mode, cert("other-ca.pem")));
    ASSERT_NE(error, "") << mode;
    EXPECT_NE(error.find("BackendError 2026"), std::string::npos) << mode << ": " << error;
    EXPECT_NE(error.find("127.0.0.1:33307"), std::string::npos) << mode << ": " << error;
    EXPECT_NE(error.find("certificate"), std::string::npos) << mode << ": " << error;
  }
}

TEST(Tls, VerifyIdentityRefusesAHostTheCertificateDoesNotName) {
  Options o = tls_options();
  o.host = "127.0.0.2";  // the server listens there too; its certificate does not name it
  const std::string error = construction_error(o);
  ASSERT_NE(error, "");
  EXPECT_NE(error.find("127.0.0.2:33307"), std::string::npos) << error;
  EXPECT_NE(error.find("ssl_mode verify_identity"), std::string::npos) << error;
  // verify_ca checks the signature only: the same server is accepted.
  EXPECT_EQ(construction_error(with_tls(o, "verify_ca", cert("ca.pem"))), "");
}

TEST(Tls, AClientCertificateIsUsedWhenTheAccountRequiresOne) {
  Options o = tls_options();
  o.user = "dlock_x509";
  const std::string without = construction_error(o);
  EXPECT_NE(without.find("BackendError 1045"), std::string::npos) << "REQUIRE X509: " << without;
  o.ssl_cert = cert("client.pem");
  o.ssl_key = cert("client-key.pem");
  DatabaseDistributedLock client(o);
  client.lock("x509");
  EXPECT_TRUE(client.is_held_by_current_thread("x509"));
  client.unlock("x509");
}

TEST(Tls, ARevokedServerCertificateIsRefused) {
  Options o = tls_options();
  o.ssl_crl = cert("crl/revoked.crl");
  const std::string error = construction_error(o);
  EXPECT_NE(error.find("revoked"), std::string::npos) << error;
  o.ssl_crl = cert("crl/empty.crl");
  EXPECT_EQ(construction_error(o), "") << "a CRL that lists nothing of ours";
}

TEST(Tls, ACaDirectoryServesAsTheTrustedCas) {
  Options o = tls_options();
  o.ssl_ca.clear();
  o.ssl_capath = cert("capath");
  ASSERT_EQ(details::tls_mode(o), details::TlsMode::kVerifyIdentity);
  EXPECT_EQ(construction_error(o), "");
  o.ssl_capath = test::tls_certificates();  // the CA is there, but not hashed
  EXPECT_NE(construction_error(o), "");
}

TEST(Tls, TheDefaultEncryptsWheneverTheServerOffersTls) {
  Options o = tls_options();
  o.ssl_mode.clear();
  o.ssl_ca.clear();
  ASSERT_EQ(details::tls_mode(o), details::TlsMode::kPreferred);
  DatabaseDistributedLock client(o);
  EXPECT_FALSE(client.inspect().tls_cipher.empty());
}

TEST(Tls, ACipherListIsHonouredAndOneInCommonIsNeeded) {
  Options o = tls_options();
  o.ssl_cipher = "TLS_AES_128_GCM_SHA256";
  {
    DatabaseDistributedLock client(o);
    EXPECT_EQ(client.inspect().tls_cipher, "TLS_AES_128_GCM_SHA256");
  }
  o.ssl_cipher = "NO-SUCH-CIPHER";
  EXPECT_NE(construction_error(o).find("BackendError 2026"), std::string::npos);
}

TEST(Tls, ModesThatRequireTlsRefuseAServerWithoutIt) {
  Options plain = test::fresh_options();
  for (const char* mode : {"required", "verify_ca", "verify_identity"}) {
    const std::string error = construction_error(with_tls(plain, mode, cert("ca.pem")));
    EXPECT_NE(error.find("BackendError 2026"), std::string::npos) << mode << ": " << error;
    EXPECT_NE(error.find("127.0.0.1:33306"), std::string::npos) << mode << ": " << error;
  }
  const std::string required = construction_error(with_tls(plain, "required", ""));
  EXPECT_NE(required.find("did not encrypt"), std::string::npos) << required;
  // preferred (the default) works with a server that offers no TLS.
  DatabaseDistributedLock client(with_tls(plain, "preferred", ""));
  client.lock("n");
  client.unlock("n");
  EXPECT_EQ(client.inspect().tls_cipher, "");
}

// Every connection of the client uses the settings: failover servers too.
TEST(Tls, AFailoverServerIsCheckedLikeTheFirst) {
  Options o = tls_options();
  o.host = "127.0.0.1";
  o.port = 1;  // nothing listens: the client moves to the next server
  o.failover_servers = {{"127.0.0.2", 33307}};
  const std::string error = construction_error(o);
  EXPECT_NE(error.find("127.0.0.2:33307"), std::string::npos) << "not in the certificate: " << error;
  o.failover_servers = {{"127.0.0.1", 33307}};
  DatabaseDistributedLock client(o);
  client.lock("moved");
  client.unlock("moved");
  EXPECT_FALSE(client.inspect().tls_cipher.empty());
}

// docs/security.md: the table's rights alone are enough, fast wake-ups
// (user-level locks, KILL QUERY of the account's own bell waits) included.
TEST(Security, TheTableRightsAloneAreEnough) {
  const Options admin = tls_options();
  { DatabaseDistributedLock creates_the_table(admin); }
  const std::string user = "dlock_least";
  test::execute_tls_sql("CREATE USER IF NOT EXISTS '" + user + "'@'127.0.0.1' IDENTIFIED BY 'k'");
  test::execute_tls_sql("GRANT SELECT, INSERT, UPDATE, DELETE ON dlock_test.`" + admin.table + "` TO '" + user +
                        "'@'127.0.0.1'");
  Options o = admin;
  o.user = user;
  o.password = "k";
  o.create_table = false;
  o.fast_wakeup = true;
  o.poll_interval = 30s;  // a wake-up at the poll would take too long
  DatabaseDistributedLock a(o);
  DatabaseDistributedLock b(o);
  a.lock("x");
  std::atomic<bool> got{false};
  std::thread waiter([&] {
    if (b.try_lock("x", 20s)) {
      got = true;
      b.unlock("x");
    }
  });
  // Seen by the test's own account, which may see every session.
  const std::string bell_waits = "SELECT ID FROM information_schema.PROCESSLIST WHERE USER = '" + user + "' AND " +
                                 test::kBellWaitCondition;
  ASSERT_TRUE(test::wait_until([&] { return tls_rows(bell_waits).size() == 1; }, 15s));
  a.unlock("x");
  waiter.join();
  EXPECT_TRUE(got.load());
  EXPECT_GE(b.metrics().wakeups[index(WakeSource::kBell)], 1u) << "woken by the release's ring, not a poll";
  {
    Permit p = a.get_semaphore("s", 1).acquire();
  }
  ReadWriteLock rw = a.get_read_write_lock("rw");
  rw.lock_shared();
  rw.unlock_shared();
  a.get_fair_lock("f").lock();
  a.get_fair_lock("f").unlock();
  Election e = a.get_election("e", Owner::create());
  e.campaign("v");
  e.resign();
  a.get_multi_lock({"m1", "m2"}).lock();
  a.get_multi_lock({"m1", "m2"}).unlock();
}

// No password or key material in log lines or exception messages.
TEST(Tls, NoSecretReachesALogLineOrAnError) {
  const std::string secret = "S3cret-pa55-Word";
  const std::string user = "dlock_tls_secret";
  test::execute_tls_sql("CREATE USER IF NOT EXISTS '" + user + "'@'127.0.0.1' IDENTIFIED BY '" + secret + "'");
  test::execute_tls_sql("GRANT ALL PRIVILEGES ON *.* TO '" + user + "'@'127.0.0.1'");
  std::ifstream key_file(cert("client-key.pem"));
  std::vector<std::string> key_lines;
  for (std::string line; std::getline(key_file, line);)
    if (line.size() >= 40 && line.find("-----") == std::string::npos) key_lines.push_back(line);
  ASSERT_FALSE(key_lines.empty());

  std::ostringstream seen;
  auto logger = std::make_shared<spdlog::logger>("tls_secret", std::make_shared<spdlog::sinks::ostream_sink_mt>(seen));
  logger->set_level(spdlog::level::trace);
  Options o = tls_options();
  o.user = user;
  o.password = secret;
  o.logger = logger;
  o.ssl_cert = cert("client.pem");
  o.ssl_key = cert("client-key.pem");
  {
    DatabaseDistributedLock client(o);
    client.lock("s");
    client.unlock("s");
  }
  Options wrong_ca = with_tls(o, "verify_identity", cert("other-ca.pem"));
  seen << construction_error(wrong_ca) << "\n";
  Options wrong_password = o;
  wrong_password.password = secret + "x";
  seen << construction_error(wrong_password) << "\n";
  Options plaintext = with_tls(o, "disabled", "");
  plaintext.ssl_cert.clear();
  plaintext.ssl_key.clear();
  seen << construction_error(plaintext) << "\n";
  for (const char* url : {"mysqlx://u:S3cret-pa55-Word@h/d", "mysql://u:S3cret-pa55-Word@h:0/d",
                          "mysql://u:S3cret-pa55-Word@h/d?ssl_ca=/nowhere", "mysql://u:S3cret-pa55-Word@h/d?nope=1"}) {
    try {
      (void)Options::from_url(url);
      seen << "parsed " << url << "\n";
    } catch (const std::invalid_argument& e) {
      seen << e.what() << "\n";
    }
  }
  const std::string text = seen.str();
  EXPECT_NE(text.find("dlock"), std::string::npos) << "something was logged";
  EXPECT_EQ(text.find(secret), std::string::npos) << text;
  for (const auto& line : key_lines) EXPECT_EQ(text.find(line), std::string::npos) << "key material: " << text;
}

}  // namespace
}  // namespace dlock
