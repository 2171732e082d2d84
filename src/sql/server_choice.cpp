#include "sql/server_choice.hpp"

#include <utility>

namespace dlock::details {

ServerChoice::ServerChoice(std::vector<Server> servers) : servers_(std::move(servers)) {}

std::size_t ServerChoice::current() const {
  std::lock_guard<std::mutex> guard(mutex_);
  return current_;
}

std::size_t ServerChoice::move_on(std::size_t failed) {
  MoveHook hook;
  std::size_t now = 0;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    if (current_ != failed || servers_.size() < 2) return current_;
    current_ = (current_ + 1) % servers_.size();
    now = current_;
    hook = hook_;
  }
  if (hook) hook(servers_[failed], servers_[now]);
  return now;
}

void ServerChoice::on_move(MoveHook hook) {
  std::lock_guard<std::mutex> guard(mutex_);
  hook_ = std::move(hook);
}

std::string ServerChoice::describe() const {
  std::string out;
  for (const auto& s : servers_) {
    if (!out.empty()) out += ',';
    out += s.host.find(':') != std::string::npos ? "[" + s.host + "]" : s.host;
    out += ":" + std::to_string(s.port);
  }
  return out;
}

}  // namespace dlock::details
