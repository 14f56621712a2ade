# The installable package (issue 17): `cmake --install` into a temporary prefix, then a project
# outside kiln's tree (tests/package/) built and run against it twice: with find_package(kiln)
# and with pkg-config. Also: the installed files carry none of kiln's build flags, the installed
# program finds the installed data files, and the installed headers compile on their own.
# Inputs: BUILD (kiln's build dir), SRC (kiln's source dir), WORK (a scratch directory),
# CXX (the C++ compiler), LAUNCHER (a compiler launcher such as ccache, may be empty).
# Works for static and shared (BUILD_SHARED_LIBS=ON) builds of kiln.
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})
set(PREFIX ${WORK}/prefix)

function(run what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}):\n${out}\n${err}")
  endif()
  set(RUN_OUTPUT "${out}" PARENT_SCOPE)
endfunction()

run("cmake --install" ${CMAKE_COMMAND} --install ${BUILD} --prefix ${PREFIX})
foreach(f include/kiln/kiln.h include/kiln/version.h include/kiln/frontend/ops.h
          lib/cmake/kiln/kilnConfig.cmake lib/cmake/kiln/kilnConfigVersion.cmake
          lib/cmake/kiln/kilnTargets.cmake lib/pkgconfig/kiln.pc bin/kiln bin/kiln-opt
          share/kiln/data/digits.csv.gz)
  if(NOT EXISTS ${PREFIX}/${f})
    message(FATAL_ERROR "the install has no ${f}")
  endif()
endforeach()
# No header includes another by a source-tree path ("frontend/...", "runtime/...").
file(GLOB_RECURSE headers ${PREFIX}/include/*.h)
foreach(h IN LISTS headers)
  file(STRINGS ${h} bad REGEX "^#include \"(frontend|runtime|ir|passes|codegen)/")
  if(bad)
    message(FATAL_ERROR "${h} includes by a source-tree path: ${bad}")
  endif()
endforeach()
# None of kiln's own build flags reach consumers.
file(GLOB exported ${PREFIX}/lib/cmake/kiln/*.cmake ${PREFIX}/lib/pkgconfig/kiln.pc)
foreach(f IN LISTS exported)
  file(READ ${f} text)
  foreach(flag -march -Wall -Wextra -fsanitize EIGEN_DONT_PARALLELIZE ${SRC} ${BUILD})
    string(FIND "${text}" "${flag}" at)
    if(NOT at EQUAL -1)
      message(FATAL_ERROR "${f} passes kiln's build setting \"${flag}\" on to consumers")
    endif()
  endforeach()
endforeach()

set(launcher "")
if(LAUNCHER)
  set(launcher -DCMAKE_CXX_COMPILER_LAUNCHER=${LAUNCHER})
endif()

# 1. find_package(kiln)
run("configuring the find_package consumer" ${CMAKE_COMMAND} -S ${SRC}/tests/package
    -B ${WORK}/consumer-cmake -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER=${CXX}
    ${launcher} -DCMAKE_PREFIX_PATH=${PREFIX})
run("building the find_package consumer" ${CMAKE_COMMAND} --build ${WORK}/consumer-cmake)
run("running the find_package consumer" ${WORK}/consumer-cmake/consumer)
if(NOT RUN_OUTPUT MATCHES "consumer ok")
  message(FATAL_ERROR "find_package consumer: ${RUN_OUTPUT}")
endif()

# 2. pkg-config
find_program(PKG_CONFIG pkg-config REQUIRED)
set(ENV{PKG_CONFIG_PATH} ${PREFIX}/lib/pkgconfig)
run("pkg-config --cflags" ${PKG_CONFIG} --cflags kiln)
string(STRIP "${RUN_OUTPUT}" cflags)
run("pkg-config --libs" ${PKG_CONFIG} --libs kiln)
string(STRIP "${RUN_OUTPUT}" libs)
separate_arguments(cflags UNIX_COMMAND "${cflags}")
separate_arguments(libs UNIX_COMMAND "${libs}")
# With shared libraries, the program finds them through an RPATH relative to it (it runs from
# the prefix's bin/ below).
set(rpath "")
if(EXISTS ${PREFIX}/lib/libkiln_frontend.so)
  set(rpath "-Wl,-rpath,$ORIGIN/../lib")
endif()
run("building the pkg-config consumer" ${LAUNCHER} ${CXX} -std=c++20 -O1 ${cflags}
    ${SRC}/tests/package/consumer.cc -o ${WORK}/consumer-pc ${libs} ${rpath})
# Copied into the prefix's bin/, it finds the data files under the prefix's share/.
file(COPY ${WORK}/consumer-pc DESTINATION ${PREFIX}/bin)
run("running the pkg-config consumer" ${CMAKE_COMMAND} -E env --unset=KILN_DATA_DIR
    ${PREFIX}/bin/consumer-pc --digits)
if(NOT RUN_OUTPUT MATCHES "consumer ok" OR NOT RUN_OUTPUT MATCHES "digits 1797")
  message(FATAL_ERROR "pkg-config consumer: ${RUN_OUTPUT}")
endif()
file(REAL_PATH ${PREFIX}/share/kiln/data want)
if(NOT RUN_OUTPUT MATCHES "data_dir ${want}\n")
  message(FATAL_ERROR "the installed consumer did not use ${want}: ${RUN_OUTPUT}")
endif()

# 3. The installed programs run and say their version.
run("kiln --version" ${PREFIX}/bin/kiln --version)
if(NOT RUN_OUTPUT MATCHES "^kiln [0-9]+\\.[0-9]+\\.[0-9]+")
  message(FATAL_ERROR "installed kiln --version printed: ${RUN_OUTPUT}")
endif()
# 4. A parent project adding kiln with add_subdirectory (configured only): no tests or
# benchmarks of kiln's, none of kiln's flags on the parent's program.
run("configuring the add_subdirectory parent" ${CMAKE_COMMAND} -S ${SRC}/tests/package/parent
    -B ${WORK}/parent -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER=${CXX}
    -DKILN_SOURCE_DIR=${SRC})
file(READ ${WORK}/parent/build.ninja ninja)
string(REGEX MATCH "EXECUTABLE target (kiln_tests|kiln_core_tests|kiln_bench)\n" found "${ninja}")
if(found)
  message(FATAL_ERROR "a parent project's build has kiln's test or benchmark program: ${found}")
endif()
file(READ ${WORK}/parent/compile_commands.json commands)
string(REGEX MATCH "\"command\": \"[^\"]*consumer\\.cc[^\"]*\"" app_command "${commands}")
if(NOT app_command)
  message(FATAL_ERROR "no compile command for the parent's program in compile_commands.json")
endif()
foreach(flag -march -Wall -Wextra -fsanitize EIGEN_DONT_PARALLELIZE)
  string(FIND "${app_command}" "${flag}" at)
  if(NOT at EQUAL -1)
    message(FATAL_ERROR "the parent's program compiles with kiln's ${flag}: ${app_command}")
  endif()
endforeach()
message(STATUS "install test: find_package, pkg-config and add_subdirectory consumers ok")
