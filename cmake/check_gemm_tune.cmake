# `kiln tune` and `kiln gemm-plan` against a scratch cache directory:
#   1. no table: gemm-plan says the blocking is derived and prints the plan (with
#      --loop-invariant-b, B packed once per loop; with --dtype bf16, how a bfloat16 product runs;
#      with --rounded, which float32 operand is rounded as it is packed, and that it needs bf16);
#   2. a short tuning run writes the table (with the attention kernels' query blocks); gemm-plan
#      then reads it;
#   3. the table torn: gemm-plan warns that it is ignored and uses the derived blocking;
#   4. tuning again rebuilds it.
# Inputs: KILN (the kiln binary), WORK (a scratch directory).
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})

function(run_kiln label out_var err_var)
  execute_process(COMMAND ${CMAKE_COMMAND} -E env KILN_CACHE_DIR=${WORK} ${KILN} ${ARGN}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${label}: kiln ${ARGN} failed (${rc}): ${out}${err}")
  endif()
  set(${out_var} "${out}" PARENT_SCOPE)
  set(${err_var} "${err}" PARENT_SCOPE)
endfunction()

function(expect label text regex)
  if(NOT "${text}" MATCHES "${regex}")
    message(FATAL_ERROR "${label}: expected /${regex}/ in:\n${text}")
  endif()
endfunction()

run_kiln("derived" out err gemm-plan 1024 1024 1024 --threads 2)
if("${out}" MATCHES "kernels:  eigen" OR "${out}${err}" MATCHES "run on Eigen")
  message(STATUS "this CPU runs Eigen's GEMM: nothing to tune")
  return()
endif()
expect("derived" "${out}" "blocking: no tuned table at .*: derived blocking")
expect("derived" "${out}" "plan: +1024x1024x1024 nn, 2 threads: avx(512|2) [0-9]+x[0-9]+, grid [0-9]+x[0-9]+, A [a-z-]+, B [a-z-]+, kc [0-9]+ x [0-9]+ blocks")
run_kiln("loop" out err gemm-plan 32 256 1024 --epilogue --loop-invariant-b --threads 2)
expect("loop" "${out}" "plan: +32x256x1024 nn \\+epilogue, 2 threads: .*, B packed-once-per-loop, ")
run_kiln("bf16" out err gemm-plan 64 128 256 --dtype bf16)
expect("bf16" "${out}" "plan: +64x128x256 nn, 2 threads: [a-z0-9-]+ [0-9]+x[0-9]+, grid [0-9]+x[0-9]+, A bf16 [a-z-]+, B bf16 [a-z-]+")
expect("bf16" "${out}" "bfloat16: operands (widened to float32|packed as bf16 pairs).* \\(bf16 kernels: (amx|avx512bf16|float32), KILN_GEMM_BF16; this CPU: AVX512-BF16 (yes|no), AMX-BF16 (yes|no)\\)")
run_kiln("rounded" out err gemm-plan 512 1024 1024 --dtype bf16 --rounded b --threads 2)
expect("rounded" "${out}" "plan: +512x1024x1024 nn, 2 threads: .*, A bf16 [a-z-]+, B f32->bf16 [a-z-]+")
execute_process(COMMAND ${CMAKE_COMMAND} -E env KILN_CACHE_DIR=${WORK} ${KILN} gemm-plan 64 64 64
                        --rounded a RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(rc EQUAL 0 OR NOT "${err}" MATCHES "--rounded a describes float32 operands read as bf16; it needs --dtype bf16")
  message(FATAL_ERROR "rounded without bf16: expected an error, got ${rc}: ${out}${err}")
endif()

run_kiln("tune" out err tune --slice-ms 0.5 --rounds 1)
expect("tune" "${out}" "all classes: [0-9.]+ -> [0-9.]+ GFLOP/s .* tuned in [0-9.]+ s")
expect("tune" "${out}" "B packed from [0-9]+ rows, A direct up to [0-9]+ columns")
expect("tune" "${out}" "wrote ([^\n]*\\.tune)")
string(REGEX MATCH "wrote ([^\n]*\\.tune)" _ "${out}")
set(table "${CMAKE_MATCH_1}")
expect("tune" "${out}" "tuned table .* \\([0-9]+ classes; attention query blocks (16|32|64), causal (16|32|64)\\)")
expect("tune" "${out}" "attention: query blocks (16|32|64) / causal (16|32|64) \\(defaults 64 / 32\\)")

run_kiln("tuned" out err gemm-plan 512 1024 1024)
expect("tuned" "${out}" "blocking: tuned table ${table}")
expect("tuned" "${out}" "class:    deep-wide-many-nn \\(tuned deep-wide-many-nn\\)")

file(READ ${table} bytes)
string(LENGTH "${bytes}" size)
math(EXPR half "${size} / 2")
string(SUBSTRING "${bytes}" 0 ${half} torn)
file(WRITE ${table} "${torn}")
run_kiln("torn" out err gemm-plan 512 1024 1024)
expect("torn" "${err}" "warning: GEMM: tuned table .* ignored \\(.*no checksum line")
expect("torn" "${out}" "class:    deep-wide-many-nn \\(derived\\)")

run_kiln("rebuilt" out err tune --slice-ms 0.5 --rounds 1)
run_kiln("rebuilt" out err gemm-plan 512 1024 1024)
expect("rebuilt" "${out}" "blocking: tuned table ${table}")
