// Partitions of one worker process from the database (the partition-client
// and drop-replies faults): every connection of a library worker goes
// through black-hole proxies of its own (test/support/blackhole_proxy.hpp),
// one per server of its URL, which the nemesis cuts and heals while the
// other workers still reach the servers.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "blackhole_proxy.hpp"

namespace dlock::torture {

class WorkerProxies {
 public:
  // `url`: the worker's URL, one server or several (mysql://u:p@h1:p1,h2:p2/db...).
  explicit WorkerProxies(const std::string& url);
  // `url` with every server replaced by its proxy.
  const std::string& url() const { return url_; }
  void blackhole();
  void drop_replies();
  void heal();

 private:
  std::vector<std::unique_ptr<test::BlackholeProxy>> proxies_;
  std::string url_;
};

}  // namespace dlock::torture
