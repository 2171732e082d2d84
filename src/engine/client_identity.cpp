#include "engine/client_identity.hpp"

#include <unistd.h>

#include "base/identity.hpp"

namespace dlock::details {

namespace {
std::uint64_t random_client_key() {
  const std::uint64_t key = new_hold_id() & ((std::uint64_t{1} << 48) - 1);
  return key != 0 ? key : 1;
}
}  // namespace

ClientIdentity::ClientIdentity(const std::string& machine_id)
    : machine_id_(machine_id.empty() ? generate_machine_id() : machine_id),
      host_(host_name()),
      pid_(static_cast<std::uint32_t>(::getpid())),
      client_key_(random_client_key()),
      hold_tag_(new_hold_id() >> 48) {}

std::uint64_t ClientIdentity::tagged_hold_id() const {
  const std::uint64_t low = new_hold_id() & ((std::uint64_t{1} << 48) - 1);
  return hold_tag_ << 48 | (low != 0 ? low : 1);
}

}  // namespace dlock::details
