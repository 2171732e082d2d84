// How names read to an operator, in every command's text and JSON.
//
// Names are byte strings. Valid UTF-8 is shown as it is (JSON escapes only
// what JSON requires; the table escapes control characters). Other bytes
// cannot be JSON text: such a name's "name" is a display form (each bad byte
// replaced by U+FFFD) and "name_hex" carries the exact bytes in hex, which
// `dlock force-unlock --hex` and `dlock status --hex` accept back.
#pragma once

#include <string>
#include <string_view>


namespace dlock::cli {

bool is_utf8(std::string_view bytes);
// The name for a terminal: UTF-8 as is with control characters escaped
// (\xNN); anything else fully escaped like log messages.
std::string readable_name(std::string_view bytes);
std::string to_hex(std::string_view bytes);
// Throws std::invalid_argument on odd length or a non-hex character.
std::string from_hex(std::string_view hex);

}  // namespace dlock::cli
