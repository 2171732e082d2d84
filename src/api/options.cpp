// Options::from_url: a strict parser. Anything it does not understand is an
// error rather than a silently ignored setting, so a typo in a parameter name
// cannot quietly leave a 30-second lease where 3 seconds were meant.
#include <charconv>
#include <limits>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>

#include "dlock/options.hpp"

#include "base/validation.hpp"

namespace dlock {

namespace {

[[noreturn]] void bad_url(const std::string& why) { throw std::invalid_argument("dlock: malformed URL: " + why); }

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string percent_decode(std::string_view in, const char* what) {
  std::string out;
  out.reserve(in.size());
  for (std::size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '%') {
      out.push_back(in[i]);
      continue;
    }
    if (i + 2 >= in.size()) bad_url(std::string("truncated %-escape in ") + what);
    const int hi = hex_value(in[i + 1]);
    const int lo = hex_value(in[i + 2]);
    if (hi < 0 || lo < 0) bad_url(std::string("invalid %-escape in ") + what);
    const char c = static_cast<char>(hi * 16 + lo);
    if (c == '\0') bad_url(std::string("%00 (NUL) in ") + what);
    out.push_back(c);
    i += 2;
  }
  return out;
}

std::uint64_t parse_number(std::string_view text, const std::string& what, std::uint64_t min, std::uint64_t max) {
  std::uint64_t value = 0;
  const auto* end = text.data() + text.size();
  const auto result = std::from_chars(text.data(), end, value);
  if (text.empty() || result.ec != std::errc() || result.ptr != end)
    bad_url(what + " must be a whole number, got \"" + std::string(text) + "\"");
  if (value < min || value > max)
    bad_url(what + " must be between " + std::to_string(min) + " and " + std::to_string(max) + ", got " +
            std::string(text));
  return value;
}

Millis parse_millis(std::string_view text, const std::string& what) {
  constexpr std::uint64_t kMax = 365ULL * 24 * 3600 * 1000;
  return Millis(static_cast<Millis::rep>(parse_number(text, what, 1, kMax)));
}

bool parse_bool(std::string_view text, const std::string& what) {
  if (text == "1" || text == "true") return true;
  if (text == "0" || text == "false") return false;
  bad_url(what + " must be true, false, 1 or 0, got \"" + std::string(text) + "\"");
}

// One "host[:port]" of the authority ("[v6]:port" for IPv6). Port 0: none given.
std::pair<std::string, unsigned> parse_server(std::string_view authority) {
  std::string_view host = authority;
  std::string_view port;
  if (!authority.empty() && authority.front() == '[') {
    const auto close = authority.find(']');
    if (close == std::string_view::npos) bad_url("unterminated [IPv6] host");
    host = authority.substr(1, close - 1);
    std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') bad_url("unexpected text after ]");
      port = after.substr(1);
      if (port.empty()) bad_url("empty port");
    }
  } else {
    const auto colon = authority.rfind(':');
    if (colon != std::string_view::npos) {
      host = authority.substr(0, colon);
      port = authority.substr(colon + 1);
      if (port.empty()) bad_url("empty port");
    }
  }
  if (host.empty()) bad_url("no host");
  return {std::string(host), port.empty() ? 0U : static_cast<unsigned>(parse_number(port, "port", 1, 65535))};
}

// The TLS field a URL parameter of that name sets, or null.
std::string* tls_field(Options& options, const std::string& key) {
  if (key == "ssl_mode") return &options.ssl_mode;
  if (key == "ssl_ca") return &options.ssl_ca;
  if (key == "ssl_capath") return &options.ssl_capath;
  if (key == "ssl_cert") return &options.ssl_cert;
  if (key == "ssl_key") return &options.ssl_key;
  if (key == "ssl_crl") return &options.ssl_crl;
  if (key == "ssl_cipher") return &options.ssl_cipher;
  return nullptr;
}

void apply_parameter(Options& options, const std::string& key, const std::string& value) {
  if (key == "table") {
    options.table = value;
  } else if (key == "pool_size") {
    options.pool_size = static_cast<std::size_t>(parse_number(value, key, 1, 10000));
  } else if (key == "watchdog_timeout_ms") {
    options.watchdog_timeout = parse_millis(value, key);
  } else if (key == "poll_interval_ms") {
    options.poll_interval = parse_millis(value, key);
  } else if (key == "connect_timeout_ms") {
    options.connect_timeout = parse_millis(value, key);
  } else if (key == "io_timeout_ms") {
    options.io_timeout = parse_millis(value, key);
  } else if (key == "create_table") {
    options.create_table = parse_bool(value, key);
  } else if (key == "fast_wakeup") {
    options.fast_wakeup = parse_bool(value, key);
  } else if (key == "metrics") {
    options.metrics = parse_bool(value, key);
  } else if (key == "wakeup_connections") {
    options.wakeup_connections = static_cast<std::size_t>(parse_number(value, key, 1, 256));
  } else if (key == "machine_id") {
    options.machine_id = value;
  } else if (std::string* tls = tls_field(options, key)) {
    *tls = value;
  } else {
    bad_url("unknown parameter \"" + key + "\"");
  }
}

}  // namespace

Options Options::from_url(std::string_view url) {
  Options options;
  std::string_view rest;
  for (std::string_view scheme : {"mysql://", "mariadb://"}) {
    if (url.substr(0, scheme.size()) == scheme) {
      rest = url.substr(scheme.size());
      break;
    }
  }
  if (rest.data() == nullptr) {
    // Only the scheme is shown: the text after it may hold a password.
    const auto scheme_end = url.find("://");
    bad_url("it must start with mysql://" +
            (scheme_end == std::string_view::npos || scheme_end > 16
                 ? std::string()
                 : " (got \"" + std::string(url.substr(0, scheme_end + 3)) + "...\")"));
  }

  const auto query_at = rest.find('?');
  std::string_view query = query_at == std::string_view::npos ? std::string_view() : rest.substr(query_at + 1);
  std::string_view authority_path = rest.substr(0, query_at);

  const auto slash = authority_path.find('/');
  if (slash == std::string_view::npos) bad_url("no /database after the host");
  std::string_view authority = authority_path.substr(0, slash);
  std::string_view path = authority_path.substr(slash + 1);

  // userinfo ends at the last '@', so an unescaped '@' in a password works.
  const auto at = authority.rfind('@');
  if (at != std::string_view::npos) {
    std::string_view userinfo = authority.substr(0, at);
    authority = authority.substr(at + 1);
    const auto colon = userinfo.find(':');
    options.user = percent_decode(userinfo.substr(0, colon), "user");
    if (colon != std::string_view::npos) options.password = percent_decode(userinfo.substr(colon + 1), "password");
  }

  if (authority.empty()) bad_url("no host");
  bool first = true;
  while (true) {
    const auto comma = authority.find(',');
    const auto [host, port] = parse_server(authority.substr(0, comma));
    if (first) {
      options.host = host;
      if (port != 0) options.port = port;
      first = false;
    } else {
      options.failover_servers.push_back(Options::Server{host, port != 0 ? port : 3306U});
    }
    if (comma == std::string_view::npos) break;
    authority = authority.substr(comma + 1);
  }

  if (path.empty()) bad_url("no database name after the host");
  if (path.find('/') != std::string_view::npos) bad_url("the path must be a single database name");
  options.database = percent_decode(path, "database");

  std::set<std::string> seen;
  while (!query.empty()) {
    const auto amp = query.find('&');
    std::string_view pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    if (pair.empty()) continue;
    const auto eq = pair.find('=');
    if (eq == std::string_view::npos) bad_url("parameter \"" + std::string(pair) + "\" has no =value");
    std::string key = percent_decode(pair.substr(0, eq), "parameter name");
    std::string value = percent_decode(pair.substr(eq + 1), "parameter value");
    if (!seen.insert(key).second) bad_url("parameter \"" + key + "\" given twice");
    apply_parameter(options, key, value);
  }
  // A URL that parses but describes options no client would accept (a table
  // name with a dot, say) is refused here, where the caller still knows
  // which URL it was, rather than later at construction.
  details::validate_options(options);
  return options;
}

}  // namespace dlock
