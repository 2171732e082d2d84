// libFuzzer target: Options::from_url on arbitrary bytes.
//
// Contract under test: from_url either returns Options that pass the same
// validation every client runs at construction, or throws
// std::invalid_argument. Any other exception, a crash, or a hang is a bug.
#include <dlock/options.hpp>

#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string_view>

#include "base/validation.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view url(reinterpret_cast<const char*>(data), size);
  dlock::Options options;
  try {
    options = dlock::Options::from_url(url);
  } catch (const std::invalid_argument& e) {
    if (std::string_view(e.what()).empty()) std::abort();  // errors must say something
    return 0;
  }
  // Accepted: it must be a valid configuration.
  dlock::details::validate_options(options);
  if (options.host.empty() || options.port == 0 || options.database.empty()) std::abort();
  return 0;
}
