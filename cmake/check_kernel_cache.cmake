# The persistent kernel cache across processes (`kiln run --cache-stats` on tests/tools/affine.kir):
#   1. a cold cache directory: kernels are compiled and written;
#   2. a second process: nothing is compiled, every kernel comes from disk;
#   3. one cache file corrupted: it is detected (counted corrupt), recompiled and replaced, and
#      the outputs are still right;
#   4. another target (`kiln --target-cpu x86-64-v2`): nothing is reused from disk, every kernel
#      is compiled for it (and written); a second run at that target compiles nothing.
# Inputs: KILN (the kiln binary), SRC (the source dir), WORK (a scratch directory).
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})
set(PY /usr/bin/python3)
execute_process(COMMAND ${PY} -c "
import numpy as np
np.save('${WORK}/x.npy', np.array([[1, 2, 3], [4, 5, -9]], np.float32))
np.save('${WORK}/w.npy', np.array([[1, 0], [0, 1], [1, 1]], np.float32))
" RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "could not write the .npy inputs (python3 with numpy is needed)")
endif()

# Extra arguments go before `run` (e.g. --target-cpu x86-64-v2).
function(run_kiln label out_var)
  file(REMOVE_RECURSE ${WORK}/out)
  execute_process(COMMAND ${CMAKE_COMMAND} -E env KILN_CACHE_DIR=${WORK}/cache
                          ${KILN} ${ARGN} run ${SRC}/tests/tools/affine.kir --input 0=${WORK}/x.npy
                          --input layer/w=${WORK}/w.npy --output-dir ${WORK}/out --cache-stats
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${label}: kiln run failed (${rc}): ${out}${err}")
  endif()
  execute_process(COMMAND ${PY} -c "
import numpy as np
assert np.load('${WORK}/out/output_0.npy').tolist() == [[5, 4], [0, 0]]
" RESULT_VARIABLE rc ERROR_VARIABLE perr)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${label}: wrong output: ${perr}")
  endif()
  set(${out_var} "${out}" PARENT_SCOPE)
endfunction()

run_kiln("cold" out)
if(NOT out MATCHES "kernel cache: ([1-9][0-9]*) compiled, 0 from disk, [0-9]+ in memory, 0 corrupt, ([1-9][0-9]*) written")
  message(FATAL_ERROR "cold run: expected compiled and written kernels, got: ${out}")
endif()
set(compiled ${CMAKE_MATCH_1})

run_kiln("warm" out)
if(NOT out MATCHES "kernel cache: 0 compiled, ${compiled} from disk, [0-9]+ in memory, 0 corrupt, 0 written")
  message(FATAL_ERROR "warm run: expected 0 compiled and ${compiled} from disk, got: ${out}")
endif()

# Flip the last byte of one cache file.
file(GLOB files ${WORK}/cache/*)
list(GET files 0 victim)
execute_process(COMMAND ${PY} -c "
p = '${victim}'
b = bytearray(open(p, 'rb').read()); b[-1] ^= 0xFF; open(p, 'wb').write(bytes(b))
" RESULT_VARIABLE rc)
run_kiln("corrupted" out)
if(NOT out MATCHES "kernel cache: 1 compiled, [0-9]+ from disk, [0-9]+ in memory, 1 corrupt, 1 written")
  message(FATAL_ERROR "corrupted run: expected the bad file detected and replaced, got: ${out}")
endif()
run_kiln("repaired" out)
if(NOT out MATCHES "kernel cache: 0 compiled, ${compiled} from disk")
  message(FATAL_ERROR "after repair: expected every kernel from disk again, got: ${out}")
endif()

run_kiln("other target" out --target-cpu x86-64-v2)
if(NOT out MATCHES "kernel cache: ${compiled} compiled, 0 from disk, [0-9]+ in memory, 0 corrupt, ${compiled} written \\(target x86-64-v2\\)")
  message(FATAL_ERROR "x86-64-v2 run: expected ${compiled} kernels compiled for it, got: ${out}")
endif()
run_kiln("other target, warm" out --target-cpu x86-64-v2)
if(NOT out MATCHES "kernel cache: 0 compiled, ${compiled} from disk")
  message(FATAL_ERROR "x86-64-v2 warm run: expected every kernel from disk, got: ${out}")
endif()
