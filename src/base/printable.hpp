// Lock names are arbitrary bytes; logs and error messages show them with
// control and non-ASCII bytes escaped (\xNN), so a hostile name cannot forge
// log lines or break a terminal.
#pragma once

#include <string>
#include <string_view>

namespace dlock::details {

std::string printable(std::string_view bytes);

}  // namespace dlock::details
