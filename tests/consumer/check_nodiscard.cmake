# ctest driver: discarding the result of try_lock or of a query is a compile
# error under -Werror=unused-result (the results are [[nodiscard]]), while
# using it compiles.
foreach(expression "client.try_lock(\"n\")" "client.try_lock(\"n\", std::chrono::seconds(1))"
                   "client.try_lock(\"n\", std::chrono::seconds(1), std::chrono::seconds(5))"
                   "client.is_locked(\"n\")" "client.fencing_token(\"n\")" "lock.try_lock_for(std::chrono::seconds(1))"
                   "lock.try_lock()" "lock.hold_count()")
  foreach(mode discard use)
    if(mode STREQUAL "discard")
      set(statement "${expression};")
    else()
      set(statement "auto r = ${expression}; (void)r;")
    endif()
    file(WRITE "${WORK_DIR}/nodiscard.cpp"
         "#include <dlock/dlock.hpp>\nvoid f(dlock::DatabaseDistributedLock& client, dlock::Lock& lock) { ${statement} }\n")
    execute_process(COMMAND ${CXX_COMPILER} -std=c++20 -fsyntax-only -Werror=unused-result -I${SOURCE_DIR}/include
                            "${WORK_DIR}/nodiscard.cpp"
                    RESULT_VARIABLE rc OUTPUT_QUIET ERROR_QUIET)
    if(mode STREQUAL "discard" AND rc EQUAL 0)
      message(FATAL_ERROR "discarding ${expression} compiled: it is not [[nodiscard]]")
    elseif(mode STREQUAL "use" AND NOT rc EQUAL 0)
      message(FATAL_ERROR "using ${expression} did not compile")
    endif()
  endforeach()
endforeach()
