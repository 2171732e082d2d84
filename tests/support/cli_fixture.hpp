// The fixture of the dlock command's tests: a fresh table, a URL for it, a
// scratch directory, and helpers to run `dlock` as a real process.
#pragma once

#include <dlock/dlock.hpp>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "child_process.hpp"
#include "test_env.hpp"

namespace dlock::test {

using namespace std::chrono_literals;

constexpr int kLockLost = 200;

class Cli : public ::testing::Test {
 protected:
  using ChildProcess = test::ChildProcess;
  void SetUp() override {
    options_ = test::fresh_options();
    url_ = test::database_url_with("table=" + options_.table + "&poll_interval_ms=100&watchdog_timeout_ms=1500");
    dir_ = std::string(DLOCK_TEST_WORK_DIR) + "/" + options_.table;
    std::system(("rm -rf '" + dir_ + "' && mkdir -p '" + dir_ + "'").c_str());
  }
  std::vector<std::string> args(std::vector<std::string> rest) const {
    std::vector<std::string> a{"--url", url_};
    a.insert(a.end(), rest.begin(), rest.end());
    return a;
  }
  // Runs `dlock ARGS` to completion: output (stdout + stderr) and exit code.
  std::pair<std::string, int> run(const std::vector<std::string>& a, std::chrono::milliseconds timeout = 60s) {
    return run_program(test::cli_path(), a, timeout);
  }
  // The same for any program (-1: still running after `timeout`, killed).
  static std::pair<std::string, int> run_program(const std::string& program, const std::vector<std::string>& a,
                                                 std::chrono::milliseconds timeout = 60s) {
    ChildProcess p(program, a, true);
    int status = 0;
    std::string out = p.read_all_and_wait(timeout, status);
    const int code = status == -1 ? -1 : (WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
    return {out, code};
  }
  std::string file(const std::string& name) const { return dir_ + "/" + name; }
  static std::string slurp(const std::string& path) {
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  static bool exists(const std::string& path) { return access(path.c_str(), F_OK) == 0; }

  Options options_;
  std::string url_;
  std::string dir_;
};

}  // namespace dlock::test
