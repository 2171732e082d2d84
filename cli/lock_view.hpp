// How a lock row reads to an operator: in `dlock status` (a table, or one
// JSON object per line), in `dlock force-unlock`, and when `dlock run` says
// who holds a lock it could not get.
//
// Names are byte strings. Valid UTF-8 is shown as it is (JSON escapes only
// what JSON requires; the table escapes control characters). Other bytes
// cannot be JSON text: such a name's "name" is a display form (each bad byte
// replaced by U+FFFD) and "name_hex" carries the exact bytes in hex, which
// `dlock force-unlock --hex` and `dlock status --hex` accept back.
#pragma once

#include <string>
#include <string_view>

#include "api/tools.hpp"

namespace dlock::cli {

bool is_utf8(std::string_view bytes);
// The name for a terminal: UTF-8 as is with control characters escaped
// (\xNN); anything else fully escaped like log messages.
std::string readable_name(std::string_view bytes);
std::string to_hex(std::string_view bytes);
// Throws std::invalid_argument on odd length or a non-hex character.
std::string from_hex(std::string_view hex);

// One line of `status --json` (no newline).
std::string row_json(const details::HoldRow& row);
// "web01 (host db-7, pid 4242, owner 3), held for 12.0s, expires in 28.0s,
// fence 17" for a held row; "nobody" otherwise.
std::string holder_summary(const details::HoldRow& row);

}  // namespace dlock::cli
