# kvsim_unity(<target>): with KVSIM_UNITY on, compiles the target's C++ files in batches of
# KVSIM_UNITY_BATCH, each batch one generated translation unit that #includes its files. The heavy
# headers (nlohmann/json, GoogleTest, pybind11, the core's) are then parsed and their templates
# instantiated once per batch instead of once per file: the simulator library takes about half
# the CPU time (docs/benchmarks.md, "CI time, session 22").
#
# Why not CMake's own UNITY_BUILD: it writes absolute paths into the batch files, so the
# mutation runner's copy of the tree (another path) would generate different batch files and
# miss CI's compiler cache for every one of them. These batches include their files by the path
# relative to the project root (found through the target's -I<project root>), so a copy at any
# path generates byte-identical batches and ccache (CCACHE_BASEDIR) serves them.
#
# Left out of the batches: files that are not .cpp, files outside the project, and files with
# their own compile definitions or options (they must not leak into their batch-mates), files
# that skip the target's precompiled header, and files that #undef a macro (they configure a
# header before including it, as probe_off_test.cpp does: an include guard would hand the batch
# whichever configuration came first). Call it in the CMakeLists.txt that made the target,
# after its sources are all added.
set(KVSIM_UNITY_BATCH 8 CACHE STRING "Files per unity batch (KVSIM_UNITY)")

function(kvsim_unity target)
  if(NOT KVSIM_UNITY)
    return()
  endif()
  get_target_property(_sources ${target} SOURCES)
  set(_kept "")
  set(_batched "")  # project-relative paths, in the target's order
  foreach(_src IN LISTS _sources)
    get_filename_component(_abs "${_src}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
    file(RELATIVE_PATH _rel "${PROJECT_SOURCE_DIR}" "${_abs}")
    get_source_file_property(_defs "${_abs}" COMPILE_DEFINITIONS)
    get_source_file_property(_opts "${_abs}" COMPILE_OPTIONS)
    get_source_file_property(_no_pch "${_abs}" SKIP_PRECOMPILE_HEADERS)
    set(_undefs "")
    if(_abs MATCHES "\\.cpp$")
      # it configures a header before including it: alone, or batch-mates see that
      file(STRINGS "${_abs}" _undefs REGEX "^#undef ")
    endif()
    if(NOT _abs MATCHES "\\.cpp$" OR _rel MATCHES "^\\.\\./" OR _defs OR _opts OR _no_pch OR _undefs)
      list(APPEND _kept "${_src}")
    else()
      list(APPEND _batched "${_rel}")
    endif()
  endforeach()
  set(_batch_files "")
  list(LENGTH _batched _count)
  set(_index 0)
  set(_first 0)
  while(_first LESS _count)
    list(SUBLIST _batched ${_first} ${KVSIM_UNITY_BATCH} _batch)
    set(_content "")
    foreach(_rel IN LISTS _batch)
      string(APPEND _content "#include \"${_rel}\"\n")
    endforeach()
    set(_file "${CMAKE_CURRENT_BINARY_DIR}/kvsim_unity/${target}_${_index}.cpp")
    file(CONFIGURE OUTPUT "${_file}" CONTENT "${_content}" @ONLY)
    list(APPEND _batch_files "${_file}")
    math(EXPR _index "${_index} + 1")
    math(EXPR _first "${_first} + ${KVSIM_UNITY_BATCH}")
  endwhile()
  set_property(TARGET ${target} PROPERTY SOURCES ${_kept} ${_batch_files})
endfunction()

# The core's modules in batches too (KVSIM_UNITY_CORE, off by default): only for builds nobody
# rebuilds file by file. The mutation runner rebuilds the core one mutated file at a time, so
# the default preset keeps it per file; the fuzz smoke's one-off instrumented build batches it.
set(KVSIM_UNITY_CORE OFF CACHE BOOL "Unity batches for the core's modules too (fuzz preset)")
function(kvsim_unity_core target)
  set(KVSIM_UNITY ON)
  kvsim_unity(${target})
endfunction()
