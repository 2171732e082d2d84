# Debian packages with CPack (scripts/package.sh runs `cpack -G DEB`):
#   libdlock-dev  the `dev` component: headers, the library, the CMake
#                 package config and dlock.pc (cmake/DlockInstall.cmake)
#   dlock         the `cli` component: the command and its manual page
# Each carries the copyright and a changelog in /usr/share/doc/<package>,
# as Debian policy asks.
set(CPACK_PACKAGE_NAME dlock)
set(CPACK_PACKAGE_VENDOR "The dlock authors")
set(CPACK_PACKAGE_CONTACT "The dlock authors <dlock@dlock.invalid>")
set(CPACK_PACKAGE_VERSION "${PROJECT_VERSION}")
# CPackDeb puts a summary other than CPack's default in front of each
# component's description, whose own first line is its summary already.
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "${CMAKE_PROJECT_NAME} built using CMake")
set(CPACK_STRIP_FILES ON)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_GENERATOR DEB)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL dev cli)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_HOMEPAGE "https://github.com/dlock/dlock")
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_RELEASE 1)

set(CPACK_DEBIAN_DEV_PACKAGE_NAME libdlock-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
# The static library needs Connector/C++ and spdlog at link time; the
# headers include Boost.Asio's (<dlock/asio.hpp>).
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS "libmysqlcppconn-dev, libspdlog-dev, libboost-dev (>= 1.74)")
if(DLOCK_WITH_PROMETHEUS)
  # The adapter (dlock::prometheus) is in the package when it was built.
  string(APPEND CPACK_DEBIAN_DEV_PACKAGE_DEPENDS ", prometheus-cpp-dev")
endif()
set(CPACK_COMPONENT_DEV_DESCRIPTION "reentrant distributed locks on MySQL/MariaDB (development files)
dlock gives processes on many machines reentrant locks, fair locks,
semaphores, read-write locks and multi-locks backed by one MySQL or
MariaDB table, with leases decided by the database clock, fencing tokens,
watchdog renewal and synchronous and Boost.Asio asynchronous APIs.

This package holds the headers, the library, its CMake package
configuration (find_package(dlock)) and its pkg-config file.")

set(CPACK_DEBIAN_CLI_PACKAGE_NAME dlock)
set(CPACK_DEBIAN_CLI_PACKAGE_SECTION utils)
set(CPACK_DEBIAN_CLI_PACKAGE_SHLIBDEPS ON)
set(CPACK_COMPONENT_CLI_DESCRIPTION "distributed flock(1) on MySQL/MariaDB
dlock runs a command while holding a lock (or a semaphore permit, a side
of a read-write lock, a fair lock) kept in a MySQL or MariaDB table, so
cron jobs and scripts on many hosts take turns; and shows and clears the
holders of a table's locks for operators.")

# copyright and changelog.Debian.gz for each package's documentation
# directory (the changelog's date: the last change of the version header).
file(TIMESTAMP "${PROJECT_SOURCE_DIR}/include/dlock/version.hpp" dlock_changed "%a, %d %b %Y %H:%M:%S +0000" UTC)
foreach(package IN ITEMS libdlock-dev dlock)
  set(doc "${CMAKE_CURRENT_BINARY_DIR}/package-doc/${package}")
  file(MAKE_DIRECTORY "${doc}")
  file(WRITE "${doc}/changelog.Debian"
       "${package} (${PROJECT_VERSION}-1) unstable; urgency=medium\n\n"
       "  * dlock ${PROJECT_VERSION}; see the project's history for what changed.\n\n"
       " -- ${CPACK_PACKAGE_CONTACT}  ${dlock_changed}\n")
  execute_process(COMMAND gzip -9nf "${doc}/changelog.Debian")
  configure_file("${PROJECT_SOURCE_DIR}/LICENSE" "${doc}/copyright" COPYONLY)
endforeach()
install(FILES "${CMAKE_CURRENT_BINARY_DIR}/package-doc/libdlock-dev/copyright"
              "${CMAKE_CURRENT_BINARY_DIR}/package-doc/libdlock-dev/changelog.Debian.gz"
        DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/libdlock-dev COMPONENT dev)
install(FILES "${CMAKE_CURRENT_BINARY_DIR}/package-doc/dlock/copyright"
              "${CMAKE_CURRENT_BINARY_DIR}/package-doc/dlock/changelog.Debian.gz"
        DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/dlock COMPONENT cli)

include(CPack)
