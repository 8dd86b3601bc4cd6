# Generates a C file embedding configs/*.json so that `--config default`
# works from any directory and one binary carries every preset.
# Usage: cmake -DIN_DIR=... -DOUT=... -P embed_presets.cmake
file(GLOB presets "${IN_DIR}/*.json")
list(SORT presets)
set(body "/* Generated from the JSON files in configs/ by scripts/embed_presets.cmake. Do not edit. */\n#include <stddef.h>\n")
set(table "const char *const tsr_preset_table[][2] = {\n")
foreach(p IN LISTS presets)
  get_filename_component(name "${p}" NAME_WE)
  file(READ "${p}" hex HEX)
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," hex "${hex}")
  string(APPEND body "static const char preset_${name}[] = {${hex}0x00};\n")
  string(APPEND table "    {\"${name}\", preset_${name}},\n")
endforeach()
string(APPEND table "    {NULL, NULL}\n};\n")
file(WRITE "${OUT}.tmp" "${body}${table}")
execute_process(COMMAND ${CMAKE_COMMAND} -E copy_if_different "${OUT}.tmp" "${OUT}")
