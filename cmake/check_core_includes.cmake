# cmake -DDIR=<kiln/frontend> -P check_core_includes.cmake: fails when a file of the tensor core
# (DIR) includes a header of the Keras library ("kiln/keras/..."), which sits above it
# (docs/architecture.md, the order rule). Run by the build before the core compiles.
file(GLOB_RECURSE files ${DIR}/*.h ${DIR}/*.cc)
set(found "")
foreach(f IN LISTS files)
  file(STRINGS ${f} lines REGEX "^[ \t]*#[ \t]*include[ \t]*[\"<]kiln/keras/")
  foreach(line IN LISTS lines)
    file(RELATIVE_PATH rel ${DIR} ${f})
    string(APPEND found "\n  frontend/${rel}: ${line}")
  endforeach()
endforeach()
if(found)
  message(FATAL_ERROR "kiln: the tensor core (kiln/frontend/) includes the Keras library above "
                      "it, which the order rule forbids (docs/architecture.md):${found}\nMove "
                      "what the core needs into the core, or the including code into kiln/keras/.")
endif()
