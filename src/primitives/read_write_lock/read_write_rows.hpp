// The read-write lock's rows (the rule is in primitives/read_write_lock/read_write.cpp): the
// statements both of its sides run, with the reads and repairs they share.
//
// Rows: the head (3, name, 0) carries the write hold, whether a read was
// taken since the last write (read_taken) and until when a waiting
// writer's intent is live (intent_expire); a read hold is a slot
// row (4, name, reader_slot(client, n)); a client with a waiting writer
// keeps a intent row (3, name, client key) live while it waits.
//
// Thread safety: the statement texts are fixed at construction; the other
// members are safe to call concurrently.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <dlock/options.hpp>
#include "base/known_rows.hpp"
#include "sql/hold_rows.hpp"

namespace dlock::details {

class KindContext;

// The slot of a client's n-th concurrent read hold of one name: the client's
// 48-bit key, then n in 16 bits.
inline std::uint64_t reader_slot(std::uint64_t client_key, std::uint32_t index) { return client_key << 16 | index; }

struct ReadWriteRows {
  explicit ReadWriteRows(const HoldRows& rows);

  // The head row of `name`, with its live reads (how many, the longest
  // lease left, how many are other clients' with bells) and the waiting
  // writers' intents (the longest left; nullopt: none).
  struct Head {
    HoldRow row;
    std::uint64_t live_reads = 0;
    std::int64_t read_ttl_us = 0;
    std::uint64_t foreign_reads = 0;
    std::optional<std::int64_t> intents_ttl_us;
  };
  Head read_head(KindContext& e, std::string_view name) const;

  // Makes the head row of `name` if this client has not seen it yet (free,
  // fence 0). heads.forget(name) after finding it gone makes it again.
  void ensure_head(KindContext& e, Connection& c, std::string_view name);

  // Deletes slot and intent rows (of `*name`, else of any name, a bounded
  // number) that have been free or expired, and untouched, for `kept`:
  // found by a read that takes no lock, then deleted by key (conditions
  // checked again), so a row another transaction has locked costs nothing.
  void sweep(KindContext& e, Connection& c, const std::string_view* name, Millis kept);

  std::string q;  // the quoted table name
  std::string take_write;
  std::string take_write_past_reads;
  std::string hand_over_write;
  std::string intend;
  std::string withdraw;
  std::string intend_head;
  std::string withdraw_head;
  std::string take_read;
  std::string head;
  std::string poll;
  KnownRows heads;  // head rows this client knows exist
  // How long a slot or intent row stays after its lease ended before any
  // client may delete it (the rows of clients that died). Default 1 hour;
  // keep_reader_rows_for (primitives/kinds.hpp) sets it.
  std::atomic<Millis::rep> kept_ms{3600 * 1000};
  Millis kept() const { return Millis(kept_ms.load(std::memory_order_relaxed)); }
};

}  // namespace dlock::details
