// Which of a client's servers it writes through now (Options::host:port
// first, then Options::failover_servers).
//
// One ServerChoice is shared by every connection a client opens (its pool,
// its io thread, its bell connections), so they all talk to the same
// server: the single-writer setup on a cluster. The choice moves to the next
// server only when a connection to the current one cannot be opened, and
// never back on its own: the server left behind may still be up and taking
// writes (cut off from this client only), and two clients writing through
// two nodes is the multi-writer setup, which costs certification conflicts
// and leaves bells ringing on one node only.
//
// Thread safety: every member may be called from any thread.
#pragma once

#include <cstddef>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "dlock/options.hpp"

namespace dlock::details {

class ServerChoice {
 public:
  using Server = Options::Server;
  // Called after every move (without the choice's lock held).
  using MoveHook = std::function<void(const Server& from, const Server& to)>;

  // `servers`: at least one; the first is where the client starts.
  explicit ServerChoice(std::vector<Server> servers);

  std::size_t size() const { return servers_.size(); }
  const Server& server(std::size_t index) const { return servers_[index]; }
  // The index of the server connections are opened to now.
  std::size_t current() const;
  // A connection to server `failed` could not be opened: if it is still the
  // current one, the next server (after the last: the first) becomes
  // current and the hook runs. If another thread moved on already, nothing
  // changes. Returns the current index.
  std::size_t move_on(std::size_t failed);
  void on_move(MoveHook hook);
  // "h1:3306,h2:3306" for logs and messages.
  std::string describe() const;

 private:
  const std::vector<Server> servers_;
  mutable std::mutex mutex_;
  std::size_t current_ = 0;
  MoveHook hook_;
};

}  // namespace dlock::details
