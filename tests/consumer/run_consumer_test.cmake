# ctest driver: install the built dlock into a scratch prefix, then build and
# run tests/consumer against that prefix twice: with find_package(dlock
# CONFIG), and with a plain compiler command line from pkg-config.
# With -DDEBS=ON the prefix is the Debian packages instead: CPack builds
# libdlock-dev and dlock from the build tree, both are unpacked into a
# scratch root (as dpkg would install them, without touching the machine),
# the packaged command's --version and manual page are checked, and the
# root is removed at the end.
file(REMOVE_RECURSE "${WORK_DIR}")
if(DEBS)
  execute_process(COMMAND ${CMAKE_COMMAND} -E env --unset=DESTDIR cpack -G DEB --config "${BINARY_DIR}/CPackConfig.cmake"
                          -B "${WORK_DIR}/debs"
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(rc)
    message(FATAL_ERROR "cpack failed: ${out}")
  endif()
  file(GLOB debs "${WORK_DIR}/debs/*.deb")
  list(LENGTH debs count)
  if(NOT count EQUAL 2)
    message(FATAL_ERROR "expected the two packages libdlock-dev and dlock, got: ${debs}")
  endif()
  foreach(deb IN LISTS debs)
    execute_process(COMMAND dpkg-deb -x "${deb}" "${WORK_DIR}/root" RESULT_VARIABLE rc)
    if(rc)
      message(FATAL_ERROR "dpkg-deb -x ${deb} failed")
    endif()
  endforeach()
  set(prefix "${WORK_DIR}/root/usr")
  file(GLOB_RECURSE pcs "${prefix}/*/dlock.pc")
  list(GET pcs 0 pc)
  get_filename_component(pcdir "${pc}" DIRECTORY)
  file(RELATIVE_PATH LIBDIR "${prefix}" "${pcdir}/..")
  execute_process(COMMAND "${prefix}/bin/dlock" --version RESULT_VARIABLE rc OUTPUT_VARIABLE out)
  if(rc OR NOT out MATCHES "^dlock [0-9]")
    message(FATAL_ERROR "the packaged dlock command did not run: ${out}")
  endif()
  if(NOT EXISTS "${prefix}/share/man/man1/dlock.1.gz" OR NOT EXISTS "${prefix}/share/doc/dlock/copyright"
     OR NOT EXISTS "${prefix}/share/doc/libdlock-dev/copyright")
    message(FATAL_ERROR "the packages lack the manual page or a copyright file")
  endif()
else()
  set(prefix "${WORK_DIR}/prefix")
  execute_process(COMMAND ${CMAKE_COMMAND} --install "${BINARY_DIR}" --prefix "${prefix}" RESULT_VARIABLE rc)
  if(rc)
    message(FATAL_ERROR "install failed")
  endif()
endif()
set(flags "")
if(SANITIZE STREQUAL "address")
  set(flags "-fsanitize=address,undefined")
elseif(SANITIZE STREQUAL "thread")
  set(flags "-fsanitize=thread")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -S "${SOURCE_DIR}/tests/consumer" -B "${WORK_DIR}/build"
                -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_CXX_COMPILER=${CXX_COMPILER}
                "-DCMAKE_CXX_FLAGS=${flags}" "-DCMAKE_EXE_LINKER_FLAGS=${flags}"
                RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "configuring the consumer against the installed package failed")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build "${WORK_DIR}/build" RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "building the consumer failed")
endif()
set(url "$ENV{DLOCK_TEST_URL}")
if(url STREQUAL "")
  set(url "mysql://dlock:dlock-test@127.0.0.1:33306/dlock_test")
endif()
# A table of this run's own: one left by an older version's run would be
# refused (the client checks the schema version).
string(TIMESTAMP stamp "%s")
string(RANDOM LENGTH 6 ALPHABET "abcdefghijklmnopqrstuvwxyz" salt)
set(table "t_consumer_${stamp}_${salt}")
execute_process(COMMAND "${WORK_DIR}/build/consumer" "${url}?table=${table}"
                RESULT_VARIABLE rc OUTPUT_VARIABLE out)
message(STATUS "consumer (CMake) said: ${out}")
if(rc OR NOT out MATCHES "locked with fence [1-9]" OR NOT out MATCHES "guard statement made")
  message(FATAL_ERROR "the consumer did not run: ${rc}")
endif()
# The adapter: there exactly when this tree built it (WITH_PROMETHEUS).
if(WITH_PROMETHEUS)
  if(NOT EXISTS "${WORK_DIR}/build/consumer_prometheus")
    message(FATAL_ERROR "dlock::prometheus was built but the installed package does not provide it")
  endif()
  execute_process(COMMAND "${WORK_DIR}/build/consumer_prometheus" "${url}?table=${table}"
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out)
  message(STATUS "consumer (Prometheus adapter) said: ${out}")
  if(rc OR NOT out MATCHES "families [1-9][0-9]*, acquired 1")
    message(FATAL_ERROR "the Prometheus consumer did not run: ${rc}")
  endif()
elseif(EXISTS "${WORK_DIR}/build/consumer_prometheus")
  message(FATAL_ERROR "the installed package provides dlock::prometheus, which this tree did not build")
endif()

# pkg-config, as a Makefile or another build system would use it.
set(pc_dir "${prefix}/${LIBDIR}/pkgconfig")
set(ENV{PKG_CONFIG_PATH} "${pc_dir}")
# The directory of the .pc file pkg-config uses for `module` ("" if none):
# pkg-config also searches the system's directories, where a dlock
# installed on this machine must not stand in for the one under test.
function(pc_file_dir module out)
  execute_process(COMMAND pkg-config --variable=pcfiledir ${module} RESULT_VARIABLE rc OUTPUT_VARIABLE dir
                  ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(rc)
    set(dir "")
  endif()
  set(${out} "${dir}" PARENT_SCOPE)
endfunction()
pc_file_dir(dlock dlock_pc_dir)
if(NOT dlock_pc_dir STREQUAL pc_dir)
  message(FATAL_ERROR "pkg-config finds dlock in '${dlock_pc_dir}', not in the installed ${pc_dir}")
endif()
execute_process(COMMAND pkg-config --cflags --libs --static dlock
                RESULT_VARIABLE rc OUTPUT_VARIABLE pc_flags ERROR_VARIABLE pc_error OUTPUT_STRIP_TRAILING_WHITESPACE)
if(rc)
  message(FATAL_ERROR "pkg-config does not know the installed dlock: ${pc_error}")
endif()
separate_arguments(pc_flags UNIX_COMMAND "${pc_flags}")
separate_arguments(sanitize_flags UNIX_COMMAND "${flags}")
execute_process(COMMAND ${CXX_COMPILER} -std=c++20 ${sanitize_flags} "${SOURCE_DIR}/tests/consumer/main.cpp"
                        ${pc_flags} -o "${WORK_DIR}/consumer_pc"
                RESULT_VARIABLE rc ERROR_VARIABLE err)
if(rc)
  message(FATAL_ERROR "building the consumer with pkg-config's flags failed: ${err}")
endif()
execute_process(COMMAND "${WORK_DIR}/consumer_pc" "${url}?table=${table}"
                RESULT_VARIABLE rc OUTPUT_VARIABLE out)
message(STATUS "consumer (pkg-config) said: ${out}")
if(rc OR NOT out MATCHES "locked with fence [1-9]" OR NOT out MATCHES "guard statement made")
  message(FATAL_ERROR "the pkg-config consumer did not run: ${rc}")
endif()
# The adapter through pkg-config: there exactly when this tree built it.
pc_file_dir(dlock-prometheus prometheus_pc_dir)
set(pc_prometheus_missing ON)
if(prometheus_pc_dir STREQUAL pc_dir)
  set(pc_prometheus_missing OFF)
endif()
if(WITH_PROMETHEUS)
  if(pc_prometheus_missing)
    message(FATAL_ERROR "dlock::prometheus was built but the installed files have no dlock-prometheus.pc")
  endif()
  execute_process(COMMAND pkg-config --cflags --libs --static dlock-prometheus
                  RESULT_VARIABLE rc OUTPUT_VARIABLE pc_flags ERROR_VARIABLE pc_error OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(rc)
    message(FATAL_ERROR "pkg-config dlock-prometheus failed: ${pc_error}")
  endif()
  separate_arguments(pc_flags UNIX_COMMAND "${pc_flags}")
  execute_process(COMMAND ${CXX_COMPILER} -std=c++20 ${sanitize_flags}
                          "${SOURCE_DIR}/tests/consumer/prometheus_main.cpp" ${pc_flags} -o "${WORK_DIR}/consumer_pc_prometheus"
                  RESULT_VARIABLE rc ERROR_VARIABLE err)
  if(rc)
    message(FATAL_ERROR "building the Prometheus consumer with pkg-config's flags failed: ${err}")
  endif()
  execute_process(COMMAND "${WORK_DIR}/consumer_pc_prometheus" "${url}?table=${table}"
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out)
  message(STATUS "consumer (pkg-config, Prometheus adapter) said: ${out}")
  if(rc OR NOT out MATCHES "families [1-9][0-9]*, acquired 1")
    message(FATAL_ERROR "the pkg-config Prometheus consumer did not run: ${rc}")
  endif()
elseif(NOT pc_prometheus_missing)
  message(FATAL_ERROR "the installed files have a dlock-prometheus.pc, which this tree did not build")
endif()
if(DEBS)
  file(REMOVE_RECURSE "${WORK_DIR}/root")
endif()
