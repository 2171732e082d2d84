# Warnings and sanitizers shared by every target of this project.
include(GNUInstallDirs)

if(CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
  set(DLOCK_WARNING_FLAGS -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wold-style-cast)
  if(DLOCK_WERROR)
    list(APPEND DLOCK_WARNING_FLAGS -Werror)
  endif()
  # GCC 12 at -O3 reports -Wrestrict inside libstdc++'s own std::string
  # (GCC bug 105329), not in our code.
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_GREATER_EQUAL 12
     AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
    list(APPEND DLOCK_WARNING_FLAGS -Wno-restrict)
  endif()
endif()

# Applies the project's warnings to `target`. Third-party headers are
# included as system headers, so only our own code is held to them.
function(dlock_set_warnings target)
  target_compile_options(${target} PRIVATE ${DLOCK_WARNING_FLAGS})
endfunction()

if(DLOCK_SANITIZE STREQUAL "address")
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
  # GCC's -Wmaybe-uninitialized is unreliable under ASan (its docs say so):
  # it flags libstdc++'s own std::regex and std::function internals.
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    list(APPEND DLOCK_WARNING_FLAGS -Wno-maybe-uninitialized)
  endif()
elseif(DLOCK_SANITIZE STREQUAL "thread")
  add_compile_options(-fsanitize=thread -fno-omit-frame-pointer)
  # GCC warns that TSan does not model the fences inside Boost.Asio's
  # handler invocation; Asio's scheduler mutex already orders what we share.
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    add_compile_options(-Wno-tsan)
  endif()
  add_link_options(-fsanitize=thread)
elseif(NOT DLOCK_SANITIZE STREQUAL "")
  message(FATAL_ERROR "DLOCK_SANITIZE must be '', 'address' or 'thread', not '${DLOCK_SANITIZE}'")
endif()
