# Unity builds: each kiln target compiles its sources in batches, one translation unit per
# batch, so the standard library, fmt, nlohmann/json, Eigen and LLVM headers are parsed once
# per batch instead of once per file (on a 2-core machine a cold build of the `kiln` program
# takes about a third of the compiler time it takes file by file: docs/building.md).
#
# The batch size is derived from the machine that configures: a target of N sources gets
# batches of about N / (2 * cores) files (at least 1, at most KILN_UNITY_MAX_BATCH), so every
# core still has a couple of batches to work on. Sources with their own compile options (the
# Eigen kernels, the ISA-specific GEMM microkernels) compile alone, as CMake excludes them.
# -DKILN_UNITY_BUILD=OFF compiles file by file (quicker rebuilds after editing one file).
#
# Files of a batch share one translation unit, so their file-local names (anonymous namespaces,
# `static`) must differ: scripts/check-unity-names.py lists any two that do not (ctest
# build.unity_batches_share_no_names), including pairs that compile but would change which
# overload a call picks; a file that must keep such a name is listed SKIP_UNITY_BUILD_INCLUSION
# and compiles alone (tests/CMakeLists.txt lists some test files).
option(KILN_UNITY_BUILD "Compile each target's sources in batches (faster cold builds)" ON)
set(KILN_UNITY_MAX_BATCH 16 CACHE STRING "Most source files in one unity batch")

# GCC warns when a class of a file a translation unit includes (not its main file) has a member
# of a type from an anonymous namespace (-Wsubobject-linkage), as it would in a header. A batch
# includes its .cc files, where such members are fine (GradientTape::State in
# gradient_tape.cc), so the warning is off when batches are on.
if(KILN_UNITY_BUILD AND CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  target_compile_options(kiln_flags INTERFACE -Wno-subobject-linkage)
endif()

# Applies the unity plan to every C++ target defined in `dir` and the directories below it.
function(kiln_apply_unity_builds dir)
  if(NOT KILN_UNITY_BUILD)
    return()
  endif()
  cmake_host_system_information(RESULT cores QUERY NUMBER_OF_LOGICAL_CORES)
  if(cores LESS 1)
    set(cores 1)
  endif()
  set(dirs ${dir})
  set(plan "")
  while(dirs)
    list(POP_FRONT dirs d)
    get_property(subdirs DIRECTORY ${d} PROPERTY SUBDIRECTORIES)
    list(APPEND dirs ${subdirs})
    get_property(targets DIRECTORY ${d} PROPERTY BUILDSYSTEM_TARGETS)
    foreach(t IN LISTS targets)
      get_target_property(type ${t} TYPE)
      if(NOT type MATCHES "^(STATIC_LIBRARY|SHARED_LIBRARY|MODULE_LIBRARY|OBJECT_LIBRARY|EXECUTABLE)$")
        continue()
      endif()
      get_target_property(sources ${t} SOURCES)
      list(FILTER sources INCLUDE REGEX "\\.cc$")
      list(LENGTH sources n)
      math(EXPR batch "${n} / (2 * ${cores})")
      if(batch LESS 2)
        continue()  # too few sources to share their headers: file by file
      endif()
      if(batch GREATER KILN_UNITY_MAX_BATCH)
        set(batch ${KILN_UNITY_MAX_BATCH})
      endif()
      set_target_properties(${t} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE ${batch})
      string(APPEND plan " ${t}:${batch}")
    endforeach()
  endwhile()
  message(STATUS "kiln: unity batches for ${cores} cores (target:files per batch):${plan}")
endfunction()
