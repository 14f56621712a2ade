# `kiln run` on tests/tools/affine.kir against values computed by hand, plus its input errors.
# Inputs: KILN (the kiln binary), SRC (the source dir), WORK (a scratch directory).
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})
set(PY /usr/bin/python3)
execute_process(COMMAND ${PY} -c "
import numpy as np
np.save('${WORK}/x.npy', np.array([[1, 2, 3], [4, 5, -9]], np.float32))
np.save('${WORK}/w.npy', np.array([[1, 0], [0, 1], [1, 1]], np.float32))
np.save('${WORK}/bad.npy', np.zeros((2, 4), np.float32))
" RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "could not write the .npy inputs (python3 with numpy is needed)")
endif()

foreach(mode compiled reference)
  file(REMOVE_RECURSE ${WORK}/out)
  execute_process(COMMAND ${KILN} run ${SRC}/tests/tools/affine.kir --input 0=${WORK}/x.npy
                          --input layer/w=${WORK}/w.npy --output-dir ${WORK}/out --mode ${mode}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "kiln run --mode ${mode} failed (${rc}): ${out}${err}")
  endif()
  # x @ w = [[4, 5], [-5, -4]]; + [1, -1] = [[5, 4], [-4, -5]]; relu = [[5, 4], [0, 0]].
  execute_process(COMMAND ${PY} -c "
import numpy as np
y = np.load('${WORK}/out/output_0.npy')
w = np.load('${WORK}/out/layer.w.npy')
assert y.dtype == np.float32 and y.tolist() == [[5, 4], [0, 0]], y
assert w.tolist() == [[1.5, 0.5], [0.5, 1.5], [1.5, 1.5]], w
" RESULT_VARIABLE rc ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "kiln run --mode ${mode} wrote wrong values: ${err}")
  endif()
endforeach()

# A shape mismatch and a missing file are clear errors, not crashes.
execute_process(COMMAND ${KILN} run ${SRC}/tests/tools/affine.kir --input 0=${WORK}/bad.npy
                        --input layer/w=${WORK}/w.npy --output-dir ${WORK}/out
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(rc EQUAL 0 OR NOT err MATCHES "parameter %0 from .*bad.npy is f32\\[2,4\\], but the graph expects f32\\[\\?,3\\]")
  message(FATAL_ERROR "expected a shape error, got (${rc}): ${out}${err}")
endif()
execute_process(COMMAND ${KILN} run ${WORK}/missing.kir --output-dir ${WORK}/out
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(rc EQUAL 0 OR NOT err MATCHES "missing.kir")
  message(FATAL_ERROR "expected a missing-file error, got (${rc}): ${out}${err}")
endif()
