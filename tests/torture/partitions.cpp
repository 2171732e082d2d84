#include "torture/partitions.hpp"

#include <stdexcept>

namespace dlock::torture {

WorkerProxies::WorkerProxies(const std::string& url) {
  const auto at = url.find('@');
  const auto slash = url.find('/', at == std::string::npos ? url.find("://") + 3 : at);
  if (at == std::string::npos || slash == std::string::npos) throw std::invalid_argument("no servers in " + url);
  const std::string authority = url.substr(at + 1, slash - at - 1);
  std::string servers;
  std::size_t from = 0;
  while (from <= authority.size()) {
    const auto comma = authority.find(',', from);
    const std::string server = authority.substr(from, comma == std::string::npos ? std::string::npos : comma - from);
    const auto colon = server.rfind(':');
    std::string host = colon == std::string::npos ? server : server.substr(0, colon);
    const unsigned port = colon == std::string::npos ? 3306U : static_cast<unsigned>(std::stoul(server.substr(colon + 1)));
    if (host == "localhost") host = "127.0.0.1";
    proxies_.push_back(std::make_unique<test::BlackholeProxy>(port, host));
    servers += (servers.empty() ? "" : ",") + std::string("127.0.0.1:") + std::to_string(proxies_.back()->port());
    if (comma == std::string::npos) break;
    from = comma + 1;
  }
  url_ = url.substr(0, at + 1) + servers + url.substr(slash);
}

void WorkerProxies::blackhole() {
  for (auto& p : proxies_) p->blackhole();
}

void WorkerProxies::drop_replies() {
  for (auto& p : proxies_) p->drop_replies();
}

void WorkerProxies::heal() {
  for (auto& p : proxies_) p->heal();
}

}  // namespace dlock::torture
