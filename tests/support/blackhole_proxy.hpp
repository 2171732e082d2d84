// A TCP proxy between clients and a test server that can cut the way
// without closing anything, as a real network partition does: no RST, no
// FIN, packets simply stop arriving. Clients connect to 127.0.0.1:port().
//
//   blackhole()     nothing is forwarded either way, and new connections
//                   get no answer; what was sent meanwhile is held back
//                   (as TCP retransmits it) and arrives after heal().
//   drop_replies()  requests reach the server (their statements run and
//                   commit), every reply is thrown away: the client waits
//                   for an answer that never comes.
//   refuse()        every connection is closed and new ones are refused
//                   (the server is down, as far as the client can tell).
//   heal()          forwards again.
//
// One thread per proxy polls its listener and every connection.
//
// Thread safety: every member may be called from any thread.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace dlock::test {

class BlackholeProxy {
 public:
  // To the server at `target_host`:`target_port` (IPv4); listens on an
  // ephemeral port of 127.0.0.1.
  explicit BlackholeProxy(unsigned target_port, std::string target_host = "127.0.0.1");
  ~BlackholeProxy();
  BlackholeProxy(const BlackholeProxy&) = delete;
  BlackholeProxy& operator=(const BlackholeProxy&) = delete;

  unsigned port() const { return port_; }
  void blackhole();
  void drop_replies();
  void refuse();
  void heal();
  // Connections made through it so far.
  std::size_t connections() const;

 private:
  enum class Mode { kForward, kBlackhole, kDropReplies, kRefuse };
  struct Link;
  void loop();
  void accept_one();
  bool forward(Link& link, bool reply);
  void set(Mode mode);
  void poke();

  const std::string target_host_;
  const unsigned target_port_;
  int listener_ = -1;
  int wake_[2] = {-1, -1};
  unsigned port_ = 0;
  std::atomic<Mode> mode_{Mode::kForward};
  std::atomic<bool> stopping_{false};
  std::atomic<std::size_t> made_{0};
  std::vector<std::unique_ptr<Link>> links_;  // the loop's
  std::thread thread_;
};

}  // namespace dlock::test
