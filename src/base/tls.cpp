#include "base/tls.hpp"

#include <dirent.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace dlock::details {

namespace {

[[noreturn]] void reject(const std::string& what) { throw std::invalid_argument("dlock: " + what); }

constexpr std::array<std::pair<TlsMode, std::string_view>, 5> kModes{{
    {TlsMode::kDisabled, "disabled"},
    {TlsMode::kPreferred, "preferred"},
    {TlsMode::kRequired, "required"},
    {TlsMode::kVerifyCa, "verify_ca"},
    {TlsMode::kVerifyIdentity, "verify_identity"},
}};

std::string lower(std::string_view text) {
  std::string out(text);
  for (char& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

void require_readable_file(const std::string& path, const char* field) {
  if (path.empty()) return;
  std::ifstream in(path, std::ios::binary);
  if (!in) reject(std::string("Options::") + field + ": cannot read " + path + ": " + std::strerror(errno));
  // A directory opens on Linux but reads nothing.
  in.get();
  if (in.bad() || (in.fail() && !in.eof()))
    reject(std::string("Options::") + field + ": cannot read " + path + " (is it a file?)");
}

void require_readable_directory(const std::string& path, const char* field) {
  if (path.empty()) return;
  DIR* dir = ::opendir(path.c_str());
  if (dir == nullptr) reject(std::string("Options::") + field + ": cannot read directory " + path + ": " + std::strerror(errno));
  ::closedir(dir);
}

}  // namespace

TlsMode tls_mode(const Options& options) {
  if (options.ssl_mode.empty())
    return options.ssl_ca.empty() && options.ssl_capath.empty() ? TlsMode::kPreferred : TlsMode::kVerifyIdentity;
  const std::string name = lower(options.ssl_mode);
  for (const auto& [mode, text] : kModes)
    if (text == name) return mode;
  reject("Options::ssl_mode \"" + options.ssl_mode +
         "\" is not one of disabled, preferred, required, verify_ca, verify_identity");
}

std::string_view to_string(TlsMode mode) noexcept {
  for (const auto& [m, text] : kModes)
    if (m == mode) return text;
  return "unknown";
}

void validate_tls(const Options& options) {
  const TlsMode mode = tls_mode(options);
  const std::array<std::pair<const std::string*, const char*>, 6> fields{{
      {&options.ssl_ca, "ssl_ca"},
      {&options.ssl_capath, "ssl_capath"},
      {&options.ssl_cert, "ssl_cert"},
      {&options.ssl_key, "ssl_key"},
      {&options.ssl_crl, "ssl_crl"},
      {&options.ssl_cipher, "ssl_cipher"},
  }};
  if (mode == TlsMode::kDisabled) {
    for (const auto& [value, field] : fields)
      if (!value->empty()) reject(std::string("Options::ssl_mode is disabled, but Options::") + field + " is set");
    return;
  }
  if (options.ssl_cert.empty() != options.ssl_key.empty())
    reject("Options::ssl_cert and Options::ssl_key go together: a client certificate needs its key");
  if (mode == TlsMode::kVerifyCa && options.ssl_ca.empty() && options.ssl_capath.empty())
    reject("Options::ssl_mode verify_ca needs Options::ssl_ca or Options::ssl_capath (the CA to verify against)");
  require_readable_file(options.ssl_ca, "ssl_ca");
  require_readable_directory(options.ssl_capath, "ssl_capath");
  require_readable_file(options.ssl_cert, "ssl_cert");
  require_readable_file(options.ssl_key, "ssl_key");
  require_readable_file(options.ssl_crl, "ssl_crl");
}

}  // namespace dlock::details
