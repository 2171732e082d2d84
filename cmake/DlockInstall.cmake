# Install rules: headers, the library, the exported target dlock::dlock, a
# package config so consumers can `find_package(dlock CONFIG)`, and dlock.pc
# (with the adapter, dlock-prometheus.pc) for pkg-config; all in the `dev`
# component (the libdlock-dev package of cmake/DlockPackaging.cmake). The
# command is the `cli` component (cli/CMakeLists.txt).
include(CMakePackageConfigHelpers)

set(DLOCK_CMAKE_DIR "${CMAKE_INSTALL_LIBDIR}/cmake/dlock")

install(DIRECTORY include/dlock DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT dev
  PATTERN prometheus.hpp EXCLUDE)
set(DLOCK_INSTALLED_TARGETS dlock)
if(DLOCK_WITH_PROMETHEUS)
  # The adapter, its header and its targets come with the library when built.
  install(FILES include/dlock/prometheus.hpp DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/dlock COMPONENT dev)
  list(APPEND DLOCK_INSTALLED_TARGETS dlock_prometheus)
endif()
install(TARGETS ${DLOCK_INSTALLED_TARGETS} EXPORT dlockTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT dev)
install(EXPORT dlockTargets NAMESPACE dlock:: DESTINATION ${DLOCK_CMAKE_DIR} COMPONENT dev)
install(FILES sql/schema.sql DESTINATION ${CMAKE_INSTALL_DATADIR}/dlock COMPONENT dev)

configure_package_config_file(cmake/dlockConfig.cmake.in
  "${CMAKE_CURRENT_BINARY_DIR}/dlockConfig.cmake"
  INSTALL_DESTINATION ${DLOCK_CMAKE_DIR})
write_basic_package_version_file("${CMAKE_CURRENT_BINARY_DIR}/dlockConfigVersion.cmake"
  COMPATIBILITY SameMinorVersion)
install(FILES
  "${CMAKE_CURRENT_BINARY_DIR}/dlockConfig.cmake"
  "${CMAKE_CURRENT_BINARY_DIR}/dlockConfigVersion.cmake"
  cmake/FindMySQLConnectorCpp.cmake
  DESTINATION ${DLOCK_CMAKE_DIR} COMPONENT dev)

# pkg-config: `pkg-config --cflags --libs dlock` (add --static for the
# default static library, which needs Connector/C++ and spdlog at link time).
file(RELATIVE_PATH DLOCK_PC_PREFIX_FROM_PCDIR "/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/")
string(REGEX REPLACE "/$" "" DLOCK_PC_PREFIX_FROM_PCDIR "${DLOCK_PC_PREFIX_FROM_PCDIR}")
set(DLOCK_PC_CFLAGS "")
if(BUILD_SHARED_LIBS)
  set(DLOCK_PC_CFLAGS " -DDLOCK_SHARED")
endif()
configure_file(cmake/dlock.pc.in "${CMAKE_CURRENT_BINARY_DIR}/dlock.pc" @ONLY)
install(FILES "${CMAKE_CURRENT_BINARY_DIR}/dlock.pc" DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT dev)
# The adapter's: `pkg-config --cflags --libs dlock-prometheus` (it requires
# dlock and prometheus-cpp's own .pc files).
if(DLOCK_WITH_PROMETHEUS)
  configure_file(cmake/dlock-prometheus.pc.in "${CMAKE_CURRENT_BINARY_DIR}/dlock-prometheus.pc" @ONLY)
  install(FILES "${CMAKE_CURRENT_BINARY_DIR}/dlock-prometheus.pc" DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig
    COMPONENT dev)
endif()
