# `kiln train` (CNN, 2 epochs) saves weights; `kiln predict` loads them and writes logits.
file(MAKE_DIRECTORY "${WORK}")
execute_process(COMMAND ${KILN} train --model cnn --epochs 2 --verbose 0
                        --save-weights ${WORK}/cnn.safetensors
                OUTPUT_VARIABLE out RESULT_VARIABLE rc)
if(NOT rc EQUAL 0 OR NOT out MATCHES "test_accuracy: 0\\.[0-9][0-9][0-9][0-9]")
  message(FATAL_ERROR "kiln train failed (${rc}):\n${out}")
endif()
# A tiny .npy input: 2 zero images of 8x8 (float32), written by numpy.
execute_process(COMMAND /usr/bin/python3 -c "import numpy as np; np.save('${WORK}/x.npy', np.zeros((2, 8, 8), np.float32))"
                RESULT_VARIABLE prc)
if(NOT prc EQUAL 0)
  message(FATAL_ERROR "python3-numpy is needed to write the test input (scripts/install-deps.sh)")
endif()
execute_process(COMMAND ${KILN} predict --model cnn --load-weights ${WORK}/cnn.safetensors
                        --input ${WORK}/x.npy --output ${WORK}/y.npy
                OUTPUT_VARIABLE out RESULT_VARIABLE rc)
if(NOT rc EQUAL 0 OR NOT out MATCHES "wrote logits \\(2, 10\\)")
  message(FATAL_ERROR "kiln predict failed (${rc}):\n${out}")
endif()
execute_process(COMMAND ${KILN} predict --model cnn --load-weights ${WORK}/missing.safetensors
                        --input ${WORK}/x.npy --output ${WORK}/y.npy
                ERROR_VARIABLE err RESULT_VARIABLE rc)
if(rc EQUAL 0 OR NOT err MATCHES "cannot open")
  message(FATAL_ERROR "kiln predict with a missing weights file should fail clearly:\n${err}")
endif()
