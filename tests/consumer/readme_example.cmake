# Writes the first C++ block of README.md, verbatim, as a file of its own:
#   cmake -DREADME=README.md -DOUT=app.cc -P readme_example.cmake
# Nothing is added (no #include, no wrapper): the block is a whole program, and
# what compiles here is what a reader copies. Fails if README.md has no C++ block.
foreach(var README OUT)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "readme_example.cmake: -D${var}=... is required")
  endif()
endforeach()
file(READ ${README} readme)
# The first "```cpp" line up to the next "```" line; file(STRINGS) would drop
# empty lines and split at semicolons, so this works on the text itself.
string(FIND "${readme}" "\n```cpp\n" begin)
if(begin EQUAL -1)
  message(FATAL_ERROR "readme_example.cmake: no ```cpp block in ${README}")
endif()
math(EXPR begin "${begin} + 8")
string(SUBSTRING "${readme}" ${begin} -1 rest)
string(FIND "${rest}" "\n```\n" end)
if(end EQUAL -1)
  message(FATAL_ERROR "readme_example.cmake: the first ```cpp block of ${README} does not end")
endif()
math(EXPR end "${end} + 1")
string(SUBSTRING "${rest}" 0 ${end} text)
# Rewrite only when changed, so that a build does not recompile it every time.
if(EXISTS ${OUT})
  file(READ ${OUT} old)
  if(old STREQUAL text)
    return()
  endif()
endif()
file(WRITE ${OUT} "${text}")
