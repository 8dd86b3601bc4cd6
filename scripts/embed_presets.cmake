# Generates a C file embedding every *.json of a directory as a table
# {name, text}, so that `--config default` (configs/) and `--board pynq-z1`
# (boards/) work from any directory and one binary carries every file.
# Usage: cmake -DIN_DIR=... -DOUT=... [-DTABLE=tsr_preset_table] -P embed_presets.cmake
if(NOT DEFINED TABLE)
  set(TABLE tsr_preset_table)
endif()
file(GLOB presets "${IN_DIR}/*.json")
list(SORT presets)
set(body "/* Generated from the JSON files in ${IN_DIR} by scripts/embed_presets.cmake. Do not edit. */\n#include <stddef.h>\n")
set(table "const char *const ${TABLE}[][2] = {\n")
set(i 0)
foreach(p IN LISTS presets)
  get_filename_component(name "${p}" NAME_WE)
  file(READ "${p}" hex HEX)
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," hex "${hex}")
  # Names like pynq-z1 are not C identifiers: number the arrays instead.
  string(APPEND body "static const char ${TABLE}_${i}[] = {${hex}0x00};\n")
  string(APPEND table "    {\"${name}\", ${TABLE}_${i}},\n")
  math(EXPR i "${i} + 1")
endforeach()
string(APPEND table "    {NULL, NULL}\n};\n")
file(WRITE "${OUT}.tmp" "${body}${table}")
execute_process(COMMAND ${CMAKE_COMMAND} -E copy_if_different "${OUT}.tmp" "${OUT}")
