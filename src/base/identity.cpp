#include "base/identity.hpp"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <random>

namespace dlock::details {

namespace {
std::atomic<std::uint64_t> next_owner{1};
}  // namespace

std::uint64_t new_owner_id() { return next_owner.fetch_add(1, std::memory_order_relaxed); }

std::uint64_t current_thread_id() {
  thread_local const std::uint64_t id = new_owner_id();
  return id;
}

std::string host_name() {
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0 || host[0] == '\0') return "host";
  return host;
}

std::string generate_machine_id() {
  char host[65] = {};
  if (gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
  std::string h(host);
  if (h.size() > 32) h.resize(32);
  if (h.empty()) h = "host";
  std::random_device rd;
  const std::uint64_t r = (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
  char tail[48];
  std::snprintf(tail, sizeof tail, "-%ld-%012llx", static_cast<long>(getpid()),
                static_cast<unsigned long long>(r & 0xffffffffffffULL));
  return h + tail;
}

std::uint64_t new_hold_id() {
  thread_local std::mt19937_64 engine([] {
    std::random_device rd;
    std::seed_seq seq{rd(), rd(), rd(), rd(), static_cast<unsigned>(getpid())};
    return std::mt19937_64(seq);
  }());
  for (;;) {
    const std::uint64_t id = engine();
    if (id != 0) return id;
  }
}

}  // namespace dlock::details
