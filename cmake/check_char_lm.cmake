# The character language model end to end: `kiln train --model lstm` on a short text saves
# weights and their description; `kiln generate` continues a prompt from them; bad prompts and
# bad texts fail with clear messages.
file(MAKE_DIRECTORY "${WORK}")
# The first 6000 characters of the default text (GPL-3, present on every Debian system).
file(READ /usr/share/common-licenses/GPL-3 text LIMIT 6000)
file(WRITE "${WORK}/text.txt" "${text}")
execute_process(COMMAND ${KILN} train --model ${MODEL} --dataset text:${WORK}/text.txt --epochs 2
                        --seq-len 32 --units 32 --embedding-dim 16 --verbose 0
                        --save-weights ${WORK}/${MODEL}.safetensors
                OUTPUT_VARIABLE out RESULT_VARIABLE rc)
if(NOT rc EQUAL 0 OR NOT out MATCHES "test_perplexity: [0-9]+\\.[0-9]+"
   OR NOT out MATCHES "unigram_perplexity: [0-9]+\\.[0-9]+")
  message(FATAL_ERROR "kiln train --model ${MODEL} failed (${rc}):\n${out}")
endif()
execute_process(COMMAND ${KILN} generate --load-weights ${WORK}/${MODEL}.safetensors
                        --prompt "GNU " --length 40 --temperature 0.5
                OUTPUT_VARIABLE gen RESULT_VARIABLE rc)
string(LENGTH "${gen}" len)
if(NOT rc EQUAL 0 OR NOT gen MATCHES "^GNU " OR len LESS 44)
  message(FATAL_ERROR "kiln generate failed (${rc}):\n${gen}")
endif()
execute_process(COMMAND ${KILN} generate --load-weights ${WORK}/${MODEL}.safetensors
                        --prompt "GNU €" --length 5
                ERROR_VARIABLE err RESULT_VARIABLE rc)
if(rc EQUAL 0 OR NOT err MATCHES "not in the model's vocabulary")
  message(FATAL_ERROR "a prompt character outside the vocabulary should fail clearly:\n${err}")
endif()
file(WRITE "${WORK}/empty.txt" "")
execute_process(COMMAND ${KILN} train --model ${MODEL} --dataset text:${WORK}/empty.txt
                ERROR_VARIABLE err RESULT_VARIABLE rc)
if(rc EQUAL 0 OR NOT err MATCHES "is empty")
  message(FATAL_ERROR "an empty text should fail clearly:\n${err}")
endif()
