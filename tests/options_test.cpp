// Options::from_url and input validation: no database needed.
#include <dlock/dlock.hpp>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

#include "base/tls.hpp"
#include "base/validation.hpp"

namespace dlock {
namespace {

using namespace std::chrono_literals;

TEST(FromUrl, ParsesEveryPart) {
  const Options o = Options::from_url(
      "mysql://app:s3cret@db.example:3307/locks?table=my_locks&pool_size=3&watchdog_timeout_ms=9000"
      "&poll_interval_ms=250&connect_timeout_ms=1500&io_timeout_ms=2500");
  EXPECT_EQ(o.user, "app");
  EXPECT_EQ(o.password, "s3cret");
  EXPECT_EQ(o.host, "db.example");
  EXPECT_EQ(o.port, 3307u);
  EXPECT_EQ(o.database, "locks");
  EXPECT_EQ(o.table, "my_locks");
  EXPECT_EQ(o.pool_size, 3u);
  EXPECT_EQ(o.watchdog_timeout, 9000ms);
  EXPECT_EQ(o.poll_interval, 250ms);
  EXPECT_EQ(o.connect_timeout, 1500ms);
  EXPECT_EQ(o.io_timeout, 2500ms);
}

TEST(FromUrl, DefaultsWhenOmitted) {
  const Options o = Options::from_url("mysql://app@localhost/locks");
  EXPECT_EQ(o.user, "app");
  EXPECT_EQ(o.password, "");
  EXPECT_EQ(o.port, 3306u);
  EXPECT_EQ(o.table, "distributed_lock");
  EXPECT_EQ(o.watchdog_timeout, 30s);
  EXPECT_EQ(o.poll_interval, 1s);
  EXPECT_EQ(o.pool_size, 8u);
  EXPECT_TRUE(o.create_table);
}

TEST(FromUrl, PercentDecodesUserAndPassword) {
  const Options o = Options::from_url("mysql://us%40er:p%3Aa%2Fss%25@h:1/d");
  EXPECT_EQ(o.user, "us@er");
  EXPECT_EQ(o.password, "p:a/ss%");
}

TEST(FromUrl, UnescapedAtInPasswordUsesLastAt) {
  const Options o = Options::from_url("mysql://u:p@ss@h/d");
  EXPECT_EQ(o.password, "p@ss");
  EXPECT_EQ(o.host, "h");
}

TEST(FromUrl, Ipv6HostAndMariadbScheme) {
  const Options o = Options::from_url("mariadb://u:p@[::1]:3310/d?create_table=false&machine_id=worker-7");
  EXPECT_EQ(o.host, "::1");
  EXPECT_EQ(o.port, 3310u);
  EXPECT_FALSE(o.create_table);
  EXPECT_EQ(o.machine_id, "worker-7");
}

TEST(FromUrl, SeveralServersOfACluster) {
  const Options o = Options::from_url("mysql://u:p,x@h1:3307,h2,[::2]:3309/d?table=t");
  EXPECT_EQ(o.password, "p,x") << "a comma in the password is not a server list";
  EXPECT_EQ(o.host, "h1");
  EXPECT_EQ(o.port, 3307u);
  ASSERT_EQ(o.failover_servers.size(), 2u);
  EXPECT_EQ(o.failover_servers[0].host, "h2");
  EXPECT_EQ(o.failover_servers[0].port, 3306u) << "a missing port is 3306";
  EXPECT_EQ(o.failover_servers[1].host, "::2");
  EXPECT_EQ(o.failover_servers[1].port, 3309u);
  EXPECT_EQ(o.table, "t");
  EXPECT_TRUE(Options::from_url("mysql://u@h/d").failover_servers.empty());

  std::string sixteen = "mysql://u@h0";
  for (int i = 1; i < 16; ++i) sixteen += ",h" + std::to_string(i);
  EXPECT_EQ(Options::from_url(sixteen + "/d").failover_servers.size(), 15u);
  for (const std::string& bad : {std::string("mysql://u@h1,/d"), std::string("mysql://u@,h2/d"),
                                 std::string("mysql://u@h1,,h3/d"), std::string("mysql://u@h1,h2:0/d"),
                                 std::string("mysql://u@h1,h2:/d"), std::string("mysql://u@h1,[::1/d"),
                                 sixteen + ",h16/d"}) {
    EXPECT_THROW(Options::from_url(bad), std::invalid_argument) << bad;
  }
}

TEST(FromUrl, FastWakeupSettings) {
  const Options defaults = Options::from_url("mysql://u:p@h/d");
  EXPECT_TRUE(defaults.fast_wakeup);
  EXPECT_EQ(defaults.wakeup_connections, 4u);
  const Options o = Options::from_url("mysql://u:p@h/d?fast_wakeup=false&wakeup_connections=9");
  EXPECT_FALSE(o.fast_wakeup);
  EXPECT_EQ(o.wakeup_connections, 9u);
  EXPECT_TRUE(Options::from_url("mysql://u:p@h/d?fast_wakeup=1").fast_wakeup);
  for (const char* bad : {"mysql://u:p@h/d?fast_wakeup=maybe", "mysql://u:p@h/d?wakeup_connections=0",
                          "mysql://u:p@h/d?wakeup_connections=257", "mysql://u:p@h/d?wakeup_connections=-1"}) {
    EXPECT_THROW(Options::from_url(bad), std::invalid_argument) << bad;
  }
}

TEST(FromUrl, RejectsMalformedInput) {
  const char* bad[] = {
      "",
      "postgres://u:p@h/d",
      "mysql://",
      "mysql://u:p@h",           // no database
      "mysql://u:p@h/",          // empty database
      "mysql://u:p@:3306/d",     // no host
      "mysql://u:p@h:/d",        // empty port
      "mysql://u:p@h:0/d",       // port out of range
      "mysql://u:p@h:65536/d",   // port out of range
      "mysql://u:p@h:33x6/d",    // port not a number
      "mysql://u:p@h/d/x",       // path with two parts
      "mysql://u:p%zz@h/d",      // bad escape
      "mysql://u:p%2@h/d",       // truncated escape
      "mysql://u:p%00@h/d",      // NUL
      "mysql://u:p@h/d?nope=1",  // unknown parameter
      "mysql://u:p@h/d?table",   // no value
      "mysql://u:p@h/d?pool_size=0",
      "mysql://u:p@h/d?pool_size=-1",
      "mysql://u:p@h/d?pool_size=99999999999999999999999",
      "mysql://u:p@h/d?watchdog_timeout_ms=0",
      "mysql://u:p@h/d?poll_interval_ms=abc",
      "mysql://u:p@h/d?io_timeout_ms=1&io_timeout_ms=2",
      "mysql://u:p@h/d?create_table=maybe",
      "mysql://u:p@[::1/d",
      "mysql://u:p@h/d?table=a.b",             // parses, but no client accepts it (found by fuzz_from_url)
      "mysql://u:p@h/d?table=",                // empty table
      "mysql://u:p@h/d?watchdog_timeout_ms=1",  // below the 3 ms minimum
  };
  for (const char* url : bad) {
    EXPECT_THROW(Options::from_url(url), std::invalid_argument) << url;
  }
}

TEST(FromUrl, ErrorMessageNamesTheProblem) {
  try {
    Options::from_url("mysql://u:p@h/d?watchdog_timout_ms=5");
    FAIL() << "no exception";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("watchdog_timout_ms"), std::string::npos) << e.what();
  }
}

TEST(Validation, Names) {
  EXPECT_THROW(details::validate_name(""), std::invalid_argument);
  EXPECT_THROW(details::validate_name(std::string(256, 'a')), std::invalid_argument);
  EXPECT_THROW(details::validate_name(std::string("a\0b", 3)), std::invalid_argument);
  EXPECT_NO_THROW(details::validate_name(std::string(255, 'a')));
  EXPECT_NO_THROW(details::validate_name("x"));
  EXPECT_NO_THROW(details::validate_name("\xff\xfe' OR 1=1; --%_\\"));
}

TEST(Validation, Leases) {
  EXPECT_THROW(details::validate_lease(0ms), std::invalid_argument);
  EXPECT_THROW(details::validate_lease(-5ms), std::invalid_argument);
  EXPECT_THROW(details::validate_lease(std::chrono::hours(24 * 365) + 1ms), std::invalid_argument);
  EXPECT_NO_THROW(details::validate_lease(1ms));
  EXPECT_NO_THROW(details::validate_lease(std::chrono::hours(24 * 365)));
}

TEST(Validation, OptionsFields) {
  Options good = Options::from_url("mysql://u:p@h/d");
  EXPECT_NO_THROW(details::validate_options(good));
  auto expect_bad = [&](auto mutate, const char* what) {
    Options o = good;
    mutate(o);
    EXPECT_THROW(details::validate_options(o), std::invalid_argument) << what;
  };
  expect_bad([](Options& o) { o.table = "bad-name"; }, "dash in table");
  expect_bad([](Options& o) { o.table = "t`; DROP TABLE x"; }, "injection in table");
  expect_bad([](Options& o) { o.table = ""; }, "empty table");
  expect_bad([](Options& o) { o.table = std::string(65, 't'); }, "long table");
  expect_bad([](Options& o) { o.database = ""; }, "empty database");
  expect_bad([](Options& o) { o.host = ""; }, "empty host");
  expect_bad([](Options& o) { o.port = 0; }, "port 0");
  expect_bad([](Options& o) { o.failover_servers = {{"", 3306}}; }, "empty failover host");
  expect_bad([](Options& o) { o.failover_servers = {{"h2", 0}}; }, "failover port 0");
  expect_bad([](Options& o) { o.failover_servers = {{"h2", 65536}}; }, "failover port too big");
  expect_bad([](Options& o) { o.failover_servers.assign(16, Options::Server{"h", 3306}); }, "16 failover servers");
  expect_bad([](Options& o) { o.pool_size = 0; }, "pool 0");
  expect_bad([](Options& o) { o.watchdog_timeout = 0ms; }, "watchdog 0");
  expect_bad([](Options& o) { o.poll_interval = 0ms; }, "poll 0");
  expect_bad([](Options& o) { o.io_timeout = -1ms; }, "io negative");
  expect_bad([](Options& o) { o.connect_timeout = 0ms; }, "connect 0");
  expect_bad([](Options& o) { o.wakeup_connections = 0; }, "no bell connections");
  expect_bad([](Options& o) { o.wakeup_connections = 257; }, "too many bell connections");
  expect_bad([](Options& o) { o.machine_id = std::string(65, 'm'); }, "long machine id");
  expect_bad([](Options& o) { o.machine_id = std::string("a\0b", 3); }, "NUL machine id");
}

TEST(Validation, ConstructorRejectsBadOptionsBeforeConnecting) {
  // Port 1 on loopback has no server: if validation ran after connecting,
  // this would be a BackendError instead.
  Options o = Options::from_url("mysql://u:p@127.0.0.1:1/d");
  o.table = "no spaces allowed";
  EXPECT_THROW(DatabaseDistributedLock{o}, std::invalid_argument);
}

// A file the TLS checks can read (its content is never looked at).
std::string readable_file(const std::string& name) {
  std::filesystem::create_directories(DLOCK_TEST_WORK_DIR);
  const std::string path = std::string(DLOCK_TEST_WORK_DIR) + "/" + name;
  std::ofstream(path) << "not a certificate\n";
  return path;
}

TEST(FromUrl, TlsParameters) {
  const std::string ca = readable_file("ca.pem");
  const std::string cert = readable_file("cert.pem");
  const std::string key = readable_file("key.pem");
  const std::string crl = readable_file("list.crl");
  const Options o = Options::from_url("mysql://u:p@h/d?ssl_mode=VERIFY_CA&ssl_ca=" + ca + "&ssl_capath=%2Ftmp" +
                                      "&ssl_cert=" + cert + "&ssl_key=" + key + "&ssl_crl=" + crl +
                                      "&ssl_cipher=TLS_AES_128_GCM_SHA256%3ATLS_AES_256_GCM_SHA384");
  EXPECT_EQ(o.ssl_mode, "VERIFY_CA");
  EXPECT_EQ(details::tls_mode(o), details::TlsMode::kVerifyCa);
  EXPECT_EQ(o.ssl_ca, ca);
  EXPECT_EQ(o.ssl_capath, "/tmp");
  EXPECT_EQ(o.ssl_cert, cert);
  EXPECT_EQ(o.ssl_key, key);
  EXPECT_EQ(o.ssl_crl, crl);
  EXPECT_EQ(o.ssl_cipher, "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384");
}

TEST(Tls, TheDefaultModeVerifiesWhenACaIsNamedAndPrefersTlsOtherwise) {
  Options o = Options::from_url("mysql://u:p@h/d");
  EXPECT_EQ(o.ssl_mode, "");
  EXPECT_EQ(details::tls_mode(o), details::TlsMode::kPreferred);
  o.ssl_ca = readable_file("ca.pem");
  EXPECT_EQ(details::tls_mode(o), details::TlsMode::kVerifyIdentity);
  o.ssl_ca.clear();
  o.ssl_capath = "/tmp";
  EXPECT_EQ(details::tls_mode(o), details::TlsMode::kVerifyIdentity);
  for (const char* mode : {"disabled", "preferred", "required", "verify_ca", "verify_identity"}) {
    o.ssl_mode = mode;
    EXPECT_EQ(details::to_string(details::tls_mode(o)), mode);
  }
}

TEST(Tls, BadSettingsAreRefusedBeforeAnyConnectionNamingTheFile) {
  const Options good = Options::from_url("mysql://u:p@127.0.0.1:1/d");
  const std::string ca = readable_file("ca.pem");
  auto error_of = [&](auto mutate) -> std::string {
    Options o = good;
    mutate(o);
    try {
      details::validate_options(o);
    } catch (const std::invalid_argument& e) {
      // The constructor refuses it too, before connecting (port 1: nothing there).
      EXPECT_THROW(DatabaseDistributedLock{o}, std::invalid_argument);
      return e.what();
    }
    return "";
  };
  EXPECT_NE(error_of([](Options& o) { o.ssl_mode = "verify"; }).find("ssl_mode \"verify\""), std::string::npos);
  EXPECT_NE(error_of([](Options& o) { o.ssl_ca = "/no/such/ca.pem"; }).find("/no/such/ca.pem"), std::string::npos);
  EXPECT_NE(error_of([](Options& o) { o.ssl_ca = "/tmp"; }).find("ssl_ca"), std::string::npos) << "a directory";
  EXPECT_NE(error_of([](Options& o) { o.ssl_capath = "/no/such/dir"; }).find("/no/such/dir"), std::string::npos);
  EXPECT_NE(error_of([&](Options& o) {
              o.ssl_cert = readable_file("cert.pem");
              o.ssl_key = "/no/such/key.pem";
            }).find("/no/such/key.pem"),
            std::string::npos);
  EXPECT_NE(error_of([&](Options& o) { o.ssl_cert = readable_file("cert.pem"); }).find("ssl_key"), std::string::npos);
  EXPECT_NE(error_of([&](Options& o) { o.ssl_key = readable_file("key.pem"); }).find("ssl_cert"), std::string::npos);
  EXPECT_NE(error_of([](Options& o) { o.ssl_crl = "/no/such.crl"; }).find("/no/such.crl"), std::string::npos);
  EXPECT_NE(error_of([](Options& o) { o.ssl_mode = "verify_ca"; }).find("verify_ca needs"), std::string::npos);
  EXPECT_NE(error_of([&](Options& o) {
              o.ssl_mode = "disabled";
              o.ssl_ca = ca;
            }).find("disabled"),
            std::string::npos);
  EXPECT_EQ(error_of([&](Options& o) {
              o.ssl_mode = "verify_identity";  // without a CA: the system's trust store
            }),
            "");
  // From a URL too, where the caller still knows which URL it was.
  try {
    (void)Options::from_url("mysql://u:p@h/d?ssl_ca=%2Fno%2Fsuch%2Fca.pem");
    FAIL() << "no exception";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("/no/such/ca.pem"), std::string::npos) << e.what();
  }
}

TEST(FromUrl, AnErrorNeverShowsThePassword) {
  for (const char* url : {"mysqlx://u:Pa55word@h/d", "u:Pa55word@h/d", "mysql:/u:Pa55word@h/d",
                          "mysql://u:Pa55word@h:0/d", "mysql://u:Pa55word@h/d?nope=1"}) {
    try {
      (void)Options::from_url(url);
      ADD_FAILURE() << url;
    } catch (const std::invalid_argument& e) {
      EXPECT_EQ(std::string(e.what()).find("Pa55word"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace dlock
