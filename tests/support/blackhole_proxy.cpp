#include "blackhole_proxy.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <stdexcept>

namespace dlock::test {

struct BlackholeProxy::Link {
  int client = -1;
  int server = -1;
  ~Link() {
    ::close(client);
    ::close(server);
  }
};

namespace {

int connect_to(const std::string& host, unsigned port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<std::uint16_t>(port));
  ::inet_pton(AF_INET, host.c_str(), &to.sin_addr);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0) {
    ::close(fd);
    return -1;
  }
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

bool write_all(int fd, const char* data, std::size_t size) {
  while (size > 0) {
    const ssize_t n = ::send(fd, data, size, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      pollfd p{fd, POLLOUT, 0};
      ::poll(&p, 1, 100);
      continue;
    }
    if (n <= 0) return false;
    data += n;
    size -= static_cast<std::size_t>(n);
  }
  return true;
}

}  // namespace

BlackholeProxy::BlackholeProxy(unsigned target_port, std::string target_host)
    : target_host_(std::move(target_host)), target_port_(target_port) {
  listener_ = ::socket(AF_INET, SOCK_STREAM, 0);
  const int one = 1;
  ::setsockopt(listener_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in at{};
  at.sin_family = AF_INET;
  at.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof at;
  if (::bind(listener_, reinterpret_cast<sockaddr*>(&at), sizeof at) != 0 || ::listen(listener_, 256) != 0 ||
      ::getsockname(listener_, reinterpret_cast<sockaddr*>(&at), &len) != 0) {
    throw std::runtime_error(std::string("blackhole proxy: cannot listen: ") + std::strerror(errno));
  }
  port_ = ntohs(at.sin_port);
  if (::pipe(wake_) != 0) throw std::runtime_error("blackhole proxy: no pipe");
  thread_ = std::thread([this] { loop(); });
}

BlackholeProxy::~BlackholeProxy() {
  stopping_ = true;
  poke();
  thread_.join();
  links_.clear();
  ::close(listener_);
  ::close(wake_[0]);
  ::close(wake_[1]);
}

void BlackholeProxy::poke() {
  const char c = 0;
  if (::write(wake_[1], &c, 1) < 0) {
    // the loop looks at the mode again within its poll timeout anyway
  }
}

void BlackholeProxy::set(Mode mode) {
  mode_ = mode;
  poke();
}

void BlackholeProxy::blackhole() { set(Mode::kBlackhole); }
void BlackholeProxy::drop_replies() { set(Mode::kDropReplies); }
void BlackholeProxy::refuse() { set(Mode::kRefuse); }
void BlackholeProxy::heal() { set(Mode::kForward); }

std::size_t BlackholeProxy::connections() const { return made_; }

void BlackholeProxy::accept_one() {
  const int client = ::accept(listener_, nullptr, nullptr);
  if (client < 0) return;
  if (mode_ == Mode::kRefuse) {
    ::close(client);
    return;
  }
  const int server = connect_to(target_host_, target_port_);
  if (server < 0) {
    ::close(client);
    return;
  }
  const int one = 1;
  ::setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  auto link = std::make_unique<Link>();
  link->client = client;
  link->server = server;
  links_.push_back(std::move(link));
  ++made_;
}

// Moves what one side sent; false when that side (or the other) is gone.
bool BlackholeProxy::forward(Link& link, bool reply) {
  char buffer[16384];
  const int from = reply ? link.server : link.client;
  const ssize_t n = ::recv(from, buffer, sizeof buffer, MSG_DONTWAIT);
  if (n == 0) return false;
  if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
  if (reply && mode_ == Mode::kDropReplies) return true;  // thrown away
  return write_all(reply ? link.client : link.server, buffer, static_cast<std::size_t>(n));
}

void BlackholeProxy::loop() {
  while (!stopping_) {
    const Mode mode = mode_;
    if (mode == Mode::kRefuse) links_.clear();  // closed: resets reach both sides
    std::vector<pollfd> fds{{wake_[0], POLLIN, 0}};
    // In a black hole nothing is read, so what was sent stays in flight
    // (in the kernel's buffers), and connections wait in the backlog.
    if (mode != Mode::kBlackhole) {
      fds.push_back({listener_, POLLIN, 0});
      for (const auto& link : links_) {
        fds.push_back({link->client, POLLIN, 0});
        fds.push_back({link->server, POLLIN, 0});
      }
    }
    if (::poll(fds.data(), fds.size(), 100) <= 0) continue;
    if (fds[0].revents != 0) {
      char drain[64];
      while (::read(wake_[0], drain, sizeof drain) == static_cast<ssize_t>(sizeof drain)) {
      }
      continue;  // the mode may have changed: look again before moving anything
    }
    if (fds.size() == 1) continue;
    const std::size_t polled = links_.size();
    if (fds[1].revents != 0) accept_one();
    std::vector<std::unique_ptr<Link>> alive;
    for (std::size_t i = 0; i < polled; ++i) {
      const pollfd& c = fds[2 + 2 * i];
      const pollfd& s = fds[3 + 2 * i];
      bool ok = true;
      if (c.revents != 0) ok = forward(*links_[i], false);
      if (ok && s.revents != 0) ok = forward(*links_[i], true);
      if (ok) alive.push_back(std::move(links_[i]));
    }
    for (std::size_t i = polled; i < links_.size(); ++i) alive.push_back(std::move(links_[i]));  // just accepted
    links_ = std::move(alive);
  }
}

}  // namespace dlock::test
