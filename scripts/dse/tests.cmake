# Design-space exploration tests (scripts/dse/test_dse.py): space-file errors,
# the Pareto front, the accuracy objective (an ONNX workload's reference output), the host-time model, a tiny sweep end to end, the area path with a stand-in
# for synth.sh, the module-by-module estimate on a toy design, and the same sweep through a
# single-node Slurm (skipped, exit 77, when not root or munge is missing), and hostile input
# to dse.py and the other Python entry points (one line, exit 2, bounded time and memory), and
# the scale of a check (a legal 100,000-point grid in well under 120 s).
foreach(t space pareto sweep onnx accuracy host area hier slurm hostile scale)
  add_test(NAME dse_${t} COMMAND /usr/bin/python3 ${CMAKE_SOURCE_DIR}/scripts/dse/test_dse.py
           $<TARGET_FILE:tessera_cli> ${CMAKE_BINARY_DIR}/dse_test/${t} ${t})
  set_tests_properties(dse_${t} PROPERTIES TIMEOUT 600 SKIP_RETURN_CODE 77)
  if(t STREQUAL "slurm")
    set_tests_properties(dse_${t} PROPERTIES RESOURCE_LOCK slurm) # one single-node Slurm at a time
  endif()
endforeach()
