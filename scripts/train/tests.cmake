# On-device training (issue 27; train/, docs/guide/train-on-device.md), on the digits CNN
# the build trains and the rotated digits scripts/train/make_shifted.py writes:
#   test_train  (tests/test_train.c, cmocka) one step's gradients against a plain-C float
#               reference within the bounds of their int8 rounding (and of --grad-bits 16's),
#               --weight-round stochastic unbiased, device == host backward,
#               steps lower the loss, the tuned file, the driver's DRAM high-water mark,
#               refusals of options and data
#   train_cli   (scripts/train/test_train.sh) `tessera train`: every bad input refused
#               before training (exit 2, one line, the output untouched); the tuned model
#               in `tessera infer` and ONNX Runtime (same predictions, logits within 1 LSB);
#               the demo: the rotated digits learnt, the upright ones kept, against the
#               float torch reference (scripts/train/float_finetune.py)
#   train_cli_seeds  the device's accuracy against float in the mean over seeds 1-6 (fc, conv2+fc,
#               last:3; gradients rounded to nearest and stochastically) within 0.5 points (30-90 s)
#   train_cli_rtl  one epoch of conv2+fc on the Verilated RTL: the same tuned model, byte for
#               byte, as fsim's and the SystemC model's; SystemC's step cycles within 3% (~30 s)
#   train_cli_newclass  a new class: the digits CNN trained without digit 9 (make_newclass.py)
#               learns it on the device from 100 samples (+200 of the others): the new class
#               learnt, the old ones kept, both against float torch (~20 s)
# The new-class demo's base model and data (build/digits/newclass; seeded, ~10 s).
set(TSR_NEWCLASS ${TSR_DIGITS}/newclass)
add_custom_command(
  OUTPUT ${TSR_NEWCLASS}/base_qdq.onnx ${TSR_NEWCLASS}/train_x.npy ${TSR_NEWCLASS}/train_y.npy
         ${TSR_NEWCLASS}/new_x.npy ${TSR_NEWCLASS}/new_y.npy ${TSR_NEWCLASS}/old_x.npy ${TSR_NEWCLASS}/old_y.npy
  COMMAND /usr/bin/python3 ${CMAKE_SOURCE_DIR}/scripts/train/make_newclass.py ${TSR_NEWCLASS}
  DEPENDS ${CMAKE_SOURCE_DIR}/scripts/train/make_newclass.py ${CMAKE_SOURCE_DIR}/scripts/onnx/train_digits.py
  COMMENT "the new-class demo: digits CNN without digit 9 (scripts/train/make_newclass.py -> build/digits/newclass)")
add_custom_target(digits_newclass ALL DEPENDS ${TSR_NEWCLASS}/base_qdq.onnx)
add_test(NAME train_cli_newclass COMMAND ${CMAKE_SOURCE_DIR}/scripts/train/test_train.sh $<TARGET_FILE:tessera_cli>
         ${CMAKE_SOURCE_DIR} ${CMAKE_BINARY_DIR}/train_cli_newclass ${TSR_DIGITS} newclass)
set_tests_properties(train_cli_newclass PROPERTIES TIMEOUT 600)
target_link_libraries(test_train PRIVATE tsr_train)
target_compile_definitions(test_train PRIVATE TSR_DIGITS_DIR="${TSR_DIGITS}")
add_dependencies(test_train digits_model digits_shifted)
add_test(NAME train_cli COMMAND ${CMAKE_SOURCE_DIR}/scripts/train/test_train.sh $<TARGET_FILE:tessera_cli>
         ${CMAKE_SOURCE_DIR} ${CMAKE_BINARY_DIR}/train_cli ${TSR_DIGITS})
set_tests_properties(train_cli PROPERTIES TIMEOUT 600 ENVIRONMENT "TESSERA_CACHE=${TSR_RTL_CACHE}")
add_test(NAME train_cli_seeds COMMAND ${CMAKE_SOURCE_DIR}/scripts/train/test_train.sh $<TARGET_FILE:tessera_cli>
         ${CMAKE_SOURCE_DIR} ${CMAKE_BINARY_DIR}/train_cli_seeds ${TSR_DIGITS} seeds)
set_tests_properties(train_cli_seeds PROPERTIES TIMEOUT 600)
if(EXISTS ${CMAKE_SOURCE_DIR}/hw/rtl/tsr_compute.sv)
  add_test(NAME train_cli_rtl COMMAND ${CMAKE_SOURCE_DIR}/scripts/train/test_train.sh $<TARGET_FILE:tessera_cli>
           ${CMAKE_SOURCE_DIR} ${CMAKE_BINARY_DIR}/train_cli_rtl ${TSR_DIGITS} rtl)
  set_tests_properties(train_cli_rtl PROPERTIES TIMEOUT 1800 ENVIRONMENT "TESSERA_CACHE=${TSR_RTL_CACHE}")
endif()
# The layer kinds of a zoo model's last block (a DAG: residual add, depthwise strided conv, ReLU6,
# global average pool): the small residual model scripts/train/make_resblock.py trains and quantizes
# with scripts/zoo/qdq.py (needs node + onnxruntime-node for the calibration; ~30 s), made once by
# the fixture train_resblock_model for
#   train_dag   (tests/train_dag.c, cmocka) every trainable layer's dW against a plain-C double
#               reference within the bounds of the int8 rounding, device == host backward, refusal
#   train_cli_resblock  (test_train.sh resblock) `tessera train` lowers the loss and learns the shifted
#               domain; the tuned model in `tessera infer` and ONNX Runtime (same predictions);
#               backward MACs on the device >= 90%; step cycles vs inference on systemc;
#               float_finetune.py --sim grad's gradients against torch autograd's
set(TSR_RESBLOCK ${CMAKE_BINARY_DIR}/train_resblock)
add_test(NAME train_resblock_model COMMAND /usr/bin/python3 ${CMAKE_SOURCE_DIR}/scripts/train/make_resblock.py
         ${TSR_RESBLOCK})
set_tests_properties(train_resblock_model PROPERTIES FIXTURES_SETUP resblock TIMEOUT 300)
# (tests/train_dag.c is not a tests/test_*.c: its ctest needs the fixture, set here)
add_executable(train_dag ${CMAKE_SOURCE_DIR}/tests/train_dag.c)
target_link_libraries(train_dag PRIVATE tsr_train tsr_testsupport tessera PkgConfig::CMOCKA)
add_test(NAME train_dag COMMAND train_dag)
set_tests_properties(train_dag PROPERTIES FIXTURES_REQUIRED resblock TIMEOUT 600
                     ENVIRONMENT "TSR_RESBLOCK_DIR=${TSR_RESBLOCK}")
add_test(NAME train_cli_resblock COMMAND ${CMAKE_SOURCE_DIR}/scripts/train/test_train.sh $<TARGET_FILE:tessera_cli>
         ${CMAKE_SOURCE_DIR} ${CMAKE_BINARY_DIR}/train_cli_resblock ${TSR_RESBLOCK} resblock)
set_tests_properties(train_cli_resblock PROPERTIES TIMEOUT 600 FIXTURES_REQUIRED resblock)
# A model a user brings, not one written for the trainer: the zoo's torchvision ResNet-18 at 32x32 with a
# new 10-class head (scripts/zoo/build.py --classes 10), quantized by scripts/zoo/qdq.py as ONNX Runtime's
# quantize_static writes it (Relus removed, per-channel weights, shared Q/DQ constants), exported for one
# image ([1,3,32,32]), and the digits upscaled to 32x32 in 3 channels: scripts/train/make_zoo_resnet.py
# (needs node + onnxruntime-node; ~15 s), made once by the fixture train_zoo_model for
#   train_cli_zoo  (test_train.sh zoo) its last basic block + fc fine-tuned on the device on 200 digits: the
#               held-out digits learnt (from a guess), within 3 points of float torch on the same data and
#               schedule; the tuned batch-1 file in `tessera infer` and ONNX Runtime, the same predictions;
#               fc for one epoch with --update device on the file's per-channel scales against the host update
set(TSR_ZOO_TRAIN ${CMAKE_BINARY_DIR}/train_zoo)
add_test(NAME train_zoo_model COMMAND /usr/bin/python3 ${CMAKE_SOURCE_DIR}/scripts/train/make_zoo_resnet.py
         ${TSR_ZOO_TRAIN})
set_tests_properties(train_zoo_model PROPERTIES FIXTURES_SETUP zoo_train TIMEOUT 300)
add_test(NAME train_cli_zoo COMMAND ${CMAKE_SOURCE_DIR}/scripts/train/test_train.sh $<TARGET_FILE:tessera_cli>
         ${CMAKE_SOURCE_DIR} ${CMAKE_BINARY_DIR}/train_cli_zoo ${TSR_ZOO_TRAIN} zoo)
set_tests_properties(train_cli_zoo PROPERTIES TIMEOUT 600 FIXTURES_REQUIRED zoo_train)
