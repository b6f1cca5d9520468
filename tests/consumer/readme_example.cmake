# Writes the first C++ block of README.md as a compilable file:
#   cmake -DREADME=README.md -DOUT=readme_example.cc -P readme_example.cmake
# Its #include and using lines stay at file scope; the rest becomes the body of
# `void readme_example()`, with a do_work() for it to call. Fails if README.md
# has no C++ block.
foreach(var README OUT)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "readme_example.cmake: -D${var}=... is required")
  endif()
endforeach()
file(STRINGS ${README} lines)
set(in_block OFF)
set(done OFF)
set(top "")
set(body "")
foreach(line IN LISTS lines)
  if(done)
    break()
  endif()
  if(NOT in_block)
    if(line STREQUAL "```cpp")
      set(in_block ON)
    endif()
  elseif(line STREQUAL "```")
    set(done ON)
  elseif(line MATCHES "^(#include|using )")
    string(APPEND top "${line}\n")
  elseif(line STREQUAL "")
    string(APPEND body "\n")
  else()
    string(APPEND body "  ${line}\n")
  endif()
endforeach()
if(NOT done OR body STREQUAL "")
  message(FATAL_ERROR "readme_example.cmake: no ```cpp block in ${README}")
endif()
set(text "// Generated from ${README} (its first C++ block) by readme_example.cmake. Do not edit.
#include <cstdint>
#include <iostream>

${top}
namespace {
void do_work(std::uint64_t, const redlock::loss_token&) {}
}  // namespace

void readme_example();
void readme_example() {
${body}}
")
# Rewrite only when changed, so that a build does not recompile it every time.
if(EXISTS ${OUT})
  file(READ ${OUT} old)
  if(old STREQUAL text)
    return()
  endif()
endif()
file(WRITE ${OUT} "${text}")
