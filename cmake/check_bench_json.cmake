# `kiln bench` on softmax_xent (memory-bound) and the small MLP (flops-bound), 2 repetitions,
# `--json FILE`: the run succeeds, prints the table, and the JSON has every expected key with
# numbers where numbers belong, and one hardware limit per round for each workload.
# Inputs: KILN (the kiln binary), WORK (a scratch directory).
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})
execute_process(COMMAND ${KILN} bench --filter "^(softmax_xent|mlp_784_256_256_10_b64)$"
                        --repetitions 2 --min-sample-ms 2
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
if(NOT n EQUAL 2)
  message(FATAL_ERROR "bench.json: expected 2 workloads, got ${n}")
endif()
# Workloads in the suite's order: the MLP, then softmax_xent.
string(JSON name GET "${json}" workloads 1 name)
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
  string(JSON type ERROR_VARIABLE e TYPE "${json}" workloads 1 ${path})
  if(e)
    message(FATAL_ERROR "bench.json: no workloads[1].${path}: ${e}")
  endif()
  if(NOT type MATCHES "NUMBER|STRING|ARRAY")
    message(FATAL_ERROR "bench.json: workloads[1].${path} is ${type}")
  endif()
endforeach()
# The flops-bound workload: its limit in flops and the hardware limit's fraction.
string(JSON name GET "${json}" workloads 0 name)
if(NOT name STREQUAL "mlp_784_256_256_10_b64")
  message(FATAL_ERROR "bench.json: workload ${name}, expected mlp_784_256_256_10_b64")
endif()
foreach(path "limit_flops" "limit_gflops_per_second" "hardware_limit_ms"
        "ratios;hardware_limit_over_compiled" "ratios;hardware_limit_over_compiled_fastest")
  string(JSON type ERROR_VARIABLE e TYPE "${json}" workloads 0 ${path})
  if(e OR NOT type STREQUAL "NUMBER")
    message(FATAL_ERROR "bench.json: workloads[0].${path} is not a number: ${type} ${e}")
  endif()
endforeach()
# Each round's hardware limit (the FMA peak loop timed beside the variants; the copy sample for
# the memory-bound one): one per repetition.
foreach(i 0 1)
  string(JSON rounds ERROR_VARIABLE e LENGTH "${json}" workloads ${i} hardware_limit samples_ms)
  if(e OR NOT rounds EQUAL 2)
    message(FATAL_ERROR "bench.json: workloads[${i}].hardware_limit.samples_ms: ${rounds} ${e}")
  endif()
endforeach()
