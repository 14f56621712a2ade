# `cmake --install build --prefix P`: kiln's libraries, its public headers (include/kiln/...),
# the generated kiln/version.h, the CMake package (kilnConfig.cmake, kilnConfigVersion.cmake,
# kilnTargets.cmake: target kiln::kiln), kiln.pc, the `kiln` and `kiln-opt` programs and the
# data files (share/kiln/data, found at run time relative to the installed library or program:
# keras/data/data_dir.h). Consumers get kiln's include directory and libraries, none of its
# build flags.

# The file behind an include path "kiln/...": the generated version.h, else the source file
# at that path (kiln/kiln.h, kiln/<module>/<file>.h).
function(kiln_header_file header out_var)
  if(header STREQUAL "kiln/version.h")
    set(${out_var} ${KILN_BUILD_INCLUDE_DIR}/kiln/version.h PARENT_SCOPE)
  else()
    set(${out_var} ${PROJECT_SOURCE_DIR}/${header} PARENT_SCOPE)
  endif()
endfunction()

# The public headers: everything kiln/kiln.h includes, transitively (each as
# "kiln/<module>/<file>.h").
set(KILN_PUBLIC_HEADERS)
set(_kiln_queue "kiln/kiln.h")
while(_kiln_queue)
  list(POP_FRONT _kiln_queue _header)
  if(_header IN_LIST KILN_PUBLIC_HEADERS)
    continue()
  endif()
  list(APPEND KILN_PUBLIC_HEADERS ${_header})
  if(_header STREQUAL "kiln/version.h")
    continue()
  endif()
  kiln_header_file(${_header} _file)
  if(NOT EXISTS ${_file})
    message(FATAL_ERROR "kiln: public header ${_header} (${_file}) does not exist")
  endif()
  file(STRINGS ${_file} _lines REGEX "^#include \"kiln/")
  foreach(_line IN LISTS _lines)
    string(REGEX REPLACE "^#include \"([^\"]+)\".*" "\\1" _included "${_line}")
    list(APPEND _kiln_queue ${_included})
  endforeach()
endwhile()
foreach(_header IN LISTS KILN_PUBLIC_HEADERS)
  get_filename_component(_dir ${_header} DIRECTORY)
  kiln_header_file(${_header} _file)
  install(FILES ${_file} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/${_dir} COMPONENT kiln_dev)
endforeach()

set(KILN_LIBRARIES kiln_keras kiln_frontend kiln_codegen kiln_passes kiln_distributed kiln_runtime kiln_ir)
# No <target>_EXPORTS definition in shared builds (kiln's headers do not use one), so static
# and shared builds compile identical objects and share the compiler cache.
set_target_properties(${KILN_LIBRARIES} PROPERTIES DEFINE_SYMBOL "")
install(TARGETS kiln kiln_headers ${KILN_LIBRARIES}
        EXPORT kilnTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(EXPORT kilnTargets NAMESPACE kiln:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/kiln)

if(BUILD_SHARED_LIBS)
  set(KILN_STATIC_LIBRARIES OFF)
else()
  set(KILN_STATIC_LIBRARIES ON)
endif()
configure_package_config_file(cmake/kilnConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/kilnConfig.cmake
                              INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/kiln)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/kilnConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/kilnConfig.cmake ${PROJECT_BINARY_DIR}/kilnConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/kiln)

# pkg-config: a static kiln needs its private dependencies on the consumer's link line
# (LLVM has no .pc file: its library by path, as in kilnTargets.cmake).
set(KILN_PC_LIBS "")
foreach(_lib IN LISTS KILN_LIBRARIES)
  string(APPEND KILN_PC_LIBS " -l${_lib}")
endforeach()
if(KILN_STATIC_LIBRARIES)
  set(KILN_PC_REQUIRES "fmt tbb zlib libzip hdf5 ompi-c")
  set(KILN_PC_REQUIRES_PRIVATE "")
  set(KILN_PC_EXTRA_LIBS " ${KILN_LLVM_LIBRARY} -pthread")
  foreach(_lib IN LISTS CMAKE_DL_LIBS)
    string(APPEND KILN_PC_EXTRA_LIBS " -l${_lib}")
  endforeach()
else()
  set(KILN_PC_REQUIRES "fmt")
  set(KILN_PC_REQUIRES_PRIVATE "tbb zlib libzip hdf5 ompi-c")
  set(KILN_PC_EXTRA_LIBS "")
endif()
configure_file(cmake/kiln.pc.in ${PROJECT_BINARY_DIR}/kiln.pc.in @ONLY)
file(GENERATE OUTPUT ${PROJECT_BINARY_DIR}/kiln.pc INPUT ${PROJECT_BINARY_DIR}/kiln.pc.in)
install(FILES ${PROJECT_BINARY_DIR}/kiln.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# Shared libraries find each other, and the programs find them, through relative RPATHs.
if(BUILD_SHARED_LIBS)
  set_target_properties(${KILN_LIBRARIES} PROPERTIES INSTALL_RPATH "$ORIGIN")
  set_target_properties(kiln_cli kiln_bench_program kiln_opt PROPERTIES INSTALL_RPATH
                        "$ORIGIN/../${CMAKE_INSTALL_LIBDIR}")
endif()
install(TARGETS kiln_cli kiln_bench_program kiln_opt RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(FILES ${PROJECT_SOURCE_DIR}/data/digits.csv.gz
        DESTINATION ${CMAKE_INSTALL_DATADIR}/kiln/data)
