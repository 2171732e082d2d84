// The TLS settings of Options (ssl_mode, ssl_ca, ...): the mode in force
// and the checks that run before any connection (docs/security.md).
#pragma once

#include <string_view>

#include "dlock/options.hpp"

namespace dlock::details {

enum class TlsMode { kDisabled, kPreferred, kRequired, kVerifyCa, kVerifyIdentity };

// The mode `options` asks for, its default applied: empty means
// kVerifyIdentity when ssl_ca or ssl_capath is given, else kPreferred.
// Throws std::invalid_argument for an unknown name.
TlsMode tls_mode(const Options& options);
// "disabled", "preferred", "required", "verify_ca", "verify_identity".
std::string_view to_string(TlsMode mode) noexcept;
// A mode that never connects without TLS.
inline bool requires_tls(TlsMode mode) noexcept { return mode >= TlsMode::kRequired; }
// The mode is known; every file named can be read (a directory for
// ssl_capath); ssl_cert and ssl_key come together; verify_ca has a CA;
// "disabled" has no other ssl_ field. Throws std::invalid_argument naming
// the field and the file (never a file's content).
void validate_tls(const Options& options);

}  // namespace dlock::details
