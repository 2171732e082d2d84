#include "dlock/errors.hpp"

namespace dlock {

BackendError::BackendError(const std::string& what, int code, std::string sql_state)
    : Error(what), code_(code), sql_state_(std::move(sql_state)) {}

}  // namespace dlock
