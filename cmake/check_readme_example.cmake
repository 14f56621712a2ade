# Fails unless the README contains the example source verbatim (between ```cpp fences).
file(READ "${README}" readme)
file(READ "${SOURCE}" source)
string(FIND "${readme}" "${source}" pos)
if(pos EQUAL -1)
  message(FATAL_ERROR "README.md does not contain ${SOURCE} verbatim; update the README example")
endif()
