# FindMySQLConnectorCpp
# ---------------------
# Finds MySQL Connector/C++ 1.1 (the JDBC-style "legacy" API: <cppconn/...>,
# <mysql_driver.h>), which ships no CMake package of its own.
#
# Imported target:
#   MySQLConnectorCpp::MySQLConnectorCpp
# Result variables:
#   MySQLConnectorCpp_FOUND, MySQLConnectorCpp_INCLUDE_DIR,
#   MySQLConnectorCpp_LIBRARY, MySQLConnectorCpp_VERSION
# Hints:
#   MySQLConnectorCpp_ROOT (prefix to search first)

find_path(MySQLConnectorCpp_INCLUDE_DIR
  NAMES mysql_driver.h
  PATH_SUFFIXES mysql-cppconn mysql-cppconn/jdbc)
find_library(MySQLConnectorCpp_LIBRARY NAMES mysqlcppconn)

if(MySQLConnectorCpp_INCLUDE_DIR AND EXISTS "${MySQLConnectorCpp_INCLUDE_DIR}/cppconn/version_info.h")
  file(STRINGS "${MySQLConnectorCpp_INCLUDE_DIR}/cppconn/version_info.h" _mcc_version_lines
       REGEX "#define MYCPPCONN_DM_(MAJOR|MINOR|PATCH)_VERSION")
  foreach(_part MAJOR MINOR PATCH)
    string(REGEX REPLACE ".*#define MYCPPCONN_DM_${_part}_VERSION[ \t]+([0-9]+).*" "\\1" _mcc_${_part}
           "${_mcc_version_lines}")
  endforeach()
  if(_mcc_MAJOR MATCHES "^[0-9]+$")
    set(MySQLConnectorCpp_VERSION "${_mcc_MAJOR}.${_mcc_MINOR}.${_mcc_PATCH}")
  endif()
endif()

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(MySQLConnectorCpp
  REQUIRED_VARS MySQLConnectorCpp_LIBRARY MySQLConnectorCpp_INCLUDE_DIR
  VERSION_VAR MySQLConnectorCpp_VERSION)

if(MySQLConnectorCpp_FOUND AND NOT TARGET MySQLConnectorCpp::MySQLConnectorCpp)
  add_library(MySQLConnectorCpp::MySQLConnectorCpp UNKNOWN IMPORTED)
  set_target_properties(MySQLConnectorCpp::MySQLConnectorCpp PROPERTIES
    IMPORTED_LOCATION "${MySQLConnectorCpp_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${MySQLConnectorCpp_INCLUDE_DIR}")
endif()
mark_as_advanced(MySQLConnectorCpp_INCLUDE_DIR MySQLConnectorCpp_LIBRARY)
