// The dlock command over TLS: the --ssl-* options and DLOCK_SSL_* variables,
// `dlock status` saying whether its session is encrypted, and no password
// in anything it prints.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "cli_fixture.hpp"
#include "test_env.hpp"

namespace dlock {
namespace {

using test::Cli;

// The TLS server's account and database with no TLS parameter (the
// command's options give them), on the fixture's table.
std::string bare_tls_url(const std::string& table, const std::string& password = "dlock-test") {
  return "mysql://dlock:" + password + "@127.0.0.1:33307/dlock_test?table=" + table;
}

std::string ca() { return test::tls_certificates() + "/ca.pem"; }

TEST_F(Cli, StatusSaysWhetherItsSessionIsEncrypted) {
  auto [out, code] = run(args({"init"}));
  ASSERT_EQ(code, 0) << out;
  std::tie(out, code) = run(args({"status"}));
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("connection: 127.0.0.1:33306, not encrypted"), std::string::npos) << out;

  const std::string url = bare_tls_url(options_.table);
  std::tie(out, code) = run({"--url", url, "--ssl-mode", "verify_identity", "--ssl-ca", ca(), "init"});
  ASSERT_EQ(code, 0) << out;
  std::tie(out, code) = run({"--url", url, "--ssl-mode", "verify_identity", "--ssl-ca", ca(), "status"});
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("connection: 127.0.0.1:33307, encrypted (TLS, "), std::string::npos) << out;

  // The same through the environment, as for DLOCK_URL.
  ::setenv("DLOCK_SSL_CA", ca().c_str(), 1);
  std::tie(out, code) = run({"--url", url, "status"});
  ::unsetenv("DLOCK_SSL_CA");
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("encrypted (TLS, "), std::string::npos) << out;
}

TEST_F(Cli, TlsFailuresAreDatabaseErrorsAndBadFilesUsageErrors) {
  const std::string url = bare_tls_url(options_.table);
  auto [out, code] = run({"--url", url, "--ssl-mode", "disabled", "status"});
  EXPECT_EQ(code, 3) << out;
  EXPECT_NE(out.find("ssl_mode disabled"), std::string::npos) << out;
  std::tie(out, code) = run(args({"--ssl-mode", "required", "status"}));
  EXPECT_EQ(code, 3) << out;
  EXPECT_NE(out.find("did not encrypt"), std::string::npos) << out;
  std::tie(out, code) = run({"--url", url, "--ssl-ca", test::tls_certificates() + "/other-ca.pem", "status"});
  EXPECT_EQ(code, 3) << out;
  EXPECT_NE(out.find("127.0.0.1:33307"), std::string::npos) << out;
  std::tie(out, code) = run({"--url", url, "--ssl-ca", "/no/such/ca.pem", "status"});
  EXPECT_EQ(code, 2) << out;
  EXPECT_NE(out.find("/no/such/ca.pem"), std::string::npos) << out;
  std::tie(out, code) = run({"--url", url, "--ssl-mode", "sometimes", "status"});
  EXPECT_EQ(code, 2) << out;
}

TEST_F(Cli, NoPasswordInWhatItPrints) {
  const std::string secret = "Cli-S3cret-Pa55";
  const std::string wrong = bare_tls_url(options_.table, secret);
  for (const auto& a : std::vector<std::vector<std::string>>{
           {"-v", "--url", wrong, "--ssl-ca", ca(), "status"},
           {"-v", "--url", wrong, "--ssl-ca", test::tls_certificates() + "/other-ca.pem", "status"},
           {"-v", "--url", wrong, "--ssl-mode", "disabled", "status"},
           {"-v", "--url", wrong, "--ssl-ca", ca(), "run", "-n", "x", "true"},
           {"-v", "--url", "mysqlx://u:" + secret + "@h/d", "status"},
           {"-v", "--url", wrong + "&bad_parameter=1", "status"}}) {
    auto [out, code] = run(a);
    EXPECT_NE(code, 0) << out;
    EXPECT_EQ(out.find(secret), std::string::npos) << out;
  }
  // A working session, with the library's debug output on.
  const std::string url = bare_tls_url(options_.table);
  auto [out, code] = run({"-v", "--url", url, "--ssl-ca", ca(), "init"});
  ASSERT_EQ(code, 0) << out;
  std::tie(out, code) = run({"-v", "--url", url, "--ssl-ca", ca(), "run", "n", "--", "true"});
  EXPECT_EQ(code, 0) << out;
  std::tie(out, code) = run({"-v", "--url", url, "--ssl-ca", ca(), "status"});
  EXPECT_EQ(code, 0) << out;
  EXPECT_EQ(out.find("dlock-test"), std::string::npos) << out;
}

}  // namespace
}  // namespace dlock
