# `kiln bench --filter softmax_xent --repetitions 1 --json FILE`: the run succeeds, prints the
# table, and the JSON has every expected key with numbers where numbers belong.
# Inputs: KILN (the kiln binary), WORK (a scratch directory).
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})
execute_process(COMMAND ${KILN} bench --filter ^softmax_xent$ --repetitions 1 --min-sample-ms 2
                        --json ${WORK}/bench.json
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "kiln bench failed (${rc}): ${out}${err}")
endif()
if(NOT out MATCHES "workload +eager ms +compiled ms.*softmax_xent")
  message(FATAL_ERROR "kiln bench printed no table:\n${out}")
endif()
file(READ ${WORK}/bench.json json)
foreach(key kiln_version host_cpu threads repetitions load_average)
  string(JSON value ERROR_VARIABLE e GET "${json}" ${key})
  if(e)
    message(FATAL_ERROR "bench.json: no \"${key}\": ${e}")
  endif()
endforeach()
string(JSON n LENGTH "${json}" workloads)
if(NOT n EQUAL 1)
  message(FATAL_ERROR "bench.json: expected 1 workload, got ${n}")
endif()
string(JSON name GET "${json}" workloads 0 name)
if(NOT name STREQUAL "softmax_xent")
  message(FATAL_ERROR "bench.json: workload ${name}, expected softmax_xent")
endif()
# Every number the table shows, and the limit.
foreach(path "limit_kind" "limit_bytes" "copy_gb_per_second" "compile_seconds"
        "variants;eager;median_ms" "variants;compiled;median_ms" "variants;hand_written;median_ms"
        "variants;limit;median_ms" "variants;eager;min_ms" "variants;compiled;max_ms"
        "variants;compiled;samples_ms" "variants;eager;memory;total_bytes"
        "variants;compiled;memory;retained_bytes" "variants;compiled;memory;step_peak_bytes"
        "ratios;compiled_over_eager" "ratios;compiled_over_hand_written"
        "ratios;limit_over_compiled")
  string(JSON type ERROR_VARIABLE e TYPE "${json}" workloads 0 ${path})
  if(e)
    message(FATAL_ERROR "bench.json: no workloads[0].${path}: ${e}")
  endif()
  if(NOT type MATCHES "NUMBER|STRING|ARRAY")
    message(FATAL_ERROR "bench.json: workloads[0].${path} is ${type}")
  endif()
endforeach()
