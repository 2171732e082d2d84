// Who this client is in the table: the label its rows carry (machine_id),
// its host and pid, its random 48-bit key (intents, reader slots,
// queue entries) and the 16-bit tag every hold id it makes starts with, so
// a waiter tells a hold of its own client from the row alone and never
// marks it for a ring. Part of the engine (engine.hpp).
#pragma once

#include <cstdint>
#include <string>

namespace dlock::details {

class ClientIdentity {
 public:
  // `machine_id`: the label, or empty for a generated one.
  explicit ClientIdentity(const std::string& machine_id);

  const std::string& machine_id() const { return machine_id_; }
  const std::string& host() const { return host_; }
  std::uint32_t pid() const { return pid_; }
  std::uint64_t client_key() const { return client_key_; }
  std::uint64_t hold_tag() const { return hold_tag_; }
  bool is_this_clients(std::uint64_t hold_id) const { return hold_id != 0 && hold_id >> 48 == hold_tag_; }
  // A fresh hold id with this client's tag.
  std::uint64_t tagged_hold_id() const;

 protected:
  const std::string machine_id_;
  const std::string host_;
  const std::uint32_t pid_;
  const std::uint64_t client_key_;
  const std::uint64_t hold_tag_;
};

}  // namespace dlock::details
