# Parallel soak runner tests (scripts/soak/test_psoak.py): shards add up to the serial
# soak, failures of a shard fail the soak, bad command lines; and the same soak as a job
# array on a single-node Slurm (skipped, exit 77, when not root or munge is missing).
# The Slurm tests share one slurmctld port and munged: never at the same time.
# psoak_sccal_rtl: the calibration in shards (it runs the RTL).
foreach(t local slurm sccal_rtl)
  string(REPLACE "_rtl" "" which ${t})
  add_test(NAME psoak_${t} COMMAND /usr/bin/python3 ${CMAKE_SOURCE_DIR}/scripts/soak/test_psoak.py
           $<TARGET_FILE:tsr_soak> ${CMAKE_BINARY_DIR}/psoak_test/${t} ${which})
  set_tests_properties(psoak_${t} PROPERTIES TIMEOUT 600 SKIP_RETURN_CODE 77)
endforeach()
set_tests_properties(psoak_sccal_rtl PROPERTIES ENVIRONMENT "TESSERA_CACHE=${TSR_RTL_CACHE}")
set_tests_properties(psoak_slurm PROPERTIES RESOURCE_LOCK slurm)
