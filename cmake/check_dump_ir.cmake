# KILN_DUMP_IR writes the traced graph and the pipeline's stages of every trace.
# Inputs: KILN (the kiln binary), WORK (a scratch directory).
file(REMOVE_RECURSE ${WORK})
execute_process(COMMAND ${CMAKE_COMMAND} -E env KILN_DUMP_IR=${WORK} KILN_DUMP_PASSES=fusion
                        ${KILN} dump-ir --model mlp --batch-size 8
                RESULT_VARIABLE rc OUTPUT_QUIET ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "kiln dump-ir failed (${rc}): ${err}")
endif()
file(GLOB dirs ${WORK}/*)
list(LENGTH dirs n)
if(NOT n EQUAL 1)
  message(FATAL_ERROR "expected one dump directory per trace in ${WORK}, got: ${dirs}")
endif()
foreach(f 000.input.kir 001.after.fusion.kir memory_plan.txt)
  if(NOT EXISTS ${dirs}/${f})
    file(GLOB got ${dirs}/*)
    message(FATAL_ERROR "${f} was not written; the dump directory has: ${got}")
  endif()
endforeach()
file(READ ${dirs}/001.after.fusion.kir fused)
if(NOT fused MATCHES "= fusion\\(")
  message(FATAL_ERROR "001.after.fusion.kir has no fusion node")
endif()
