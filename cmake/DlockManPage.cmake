# Writes the manual page dlock(1) from the command's own --help texts, so the
# page cannot drift from the command (cmake -P, run by cli/CMakeLists.txt):
#   cmake -DDLOCK=path/to/dlock -DOUT=dlock.1.gz -P DlockManPage.cmake
# Sections: NAME and SYNOPSIS, then DESCRIPTION (the top-level help) and one
# subsection per subcommand (its help), verbatim in no-fill blocks.
if(NOT DLOCK OR NOT OUT)
  message(FATAL_ERROR "usage: cmake -DDLOCK=... -DOUT=... -P DlockManPage.cmake")
endif()

function(help_of out)
  execute_process(COMMAND "${DLOCK}" ${ARGN} --help OUTPUT_VARIABLE text RESULT_VARIABLE rc)
  if(rc)
    message(FATAL_ERROR "${DLOCK} ${ARGN} --help failed")
  endif()
  # roff: a backslash is "\e"; a line may not start with "." or "'".
  string(REPLACE "\\" "\\e" text "${text}")
  string(REGEX REPLACE "(^|\n)([.'])" "\\1\\\\&\\2" text "${text}")
  string(REGEX REPLACE "\n+$" "" text "${text}")
  set(${out} "${text}" PARENT_SCOPE)
endfunction()

execute_process(COMMAND "${DLOCK}" --version OUTPUT_VARIABLE version OUTPUT_STRIP_TRAILING_WHITESPACE)
string(REGEX REPLACE "^dlock " "" version "${version}")
help_of(top)
# The subcommands the top-level help lists.
string(REGEX MATCH "Subcommands:\n(.*)" listing "${top}")
string(REGEX MATCHALL "\n  ([a-z-]+)" subcommands "\n${CMAKE_MATCH_1}")
set(page ".TH DLOCK 1 \"\" \"dlock ${version}\" \"User Commands\"
.SH NAME
dlock \\- distributed locks on MySQL or MariaDB for shell scripts and operators
.SH SYNOPSIS
.B dlock
[\\fIOPTIONS\\fR] \\fISUBCOMMAND\\fR ...
.SH DESCRIPTION
.nf
${top}
.fi
.SH SUBCOMMANDS
")
foreach(entry IN LISTS subcommands)
  string(STRIP "${entry}" name)
  help_of(text ${name})
  string(APPEND page ".SS ${name}\n.nf\n${text}\n.fi\n")
endforeach()
string(APPEND page ".SH SEE ALSO
.BR flock (1)
")
get_filename_component(dir "${OUT}" DIRECTORY)
file(MAKE_DIRECTORY "${dir}")
string(REGEX REPLACE "\\.gz$" "" plain "${OUT}")
file(WRITE "${plain}" "${page}")
# -n: no name or time stamp in the archive (a reproducible page).
execute_process(COMMAND gzip -9nf "${plain}" RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "gzip failed")
endif()
