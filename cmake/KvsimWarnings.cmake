# kvsim_target_warnings(<target>): the project's warning set, applied to our own targets only.
function(kvsim_target_warnings target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wimplicit-fallthrough -Wno-missing-field-initializers>)
  if(KVSIM_WERROR)
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Werror>)
  endif()
endfunction()

# kvsim_module(<name> DEPS <libs...>): a static library from every .cpp in the current folder,
# installed and exported as kvsim::<name without kvsim_> (cmake/KvsimInstall.cmake).
function(kvsim_module name)
  cmake_parse_arguments(ARG "" "" "DEPS" ${ARGN})
  file(GLOB _srcs CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/*.cpp)
  add_library(${name} STATIC ${_srcs})
  target_include_directories(${name} PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}>
                                            $<INSTALL_INTERFACE:include/kvsim>)
  target_link_libraries(${name} PUBLIC ${ARG_DEPS})
  target_compile_definitions(${name} PUBLIC KVSIM_VERIFY=$<BOOL:${KVSIM_VERIFY}>
                                                   KVSIM_PROBES=$<BOOL:${KVSIM_PROBES}>)
  string(REGEX REPLACE "^kvsim_" "" _export ${name})
  set_target_properties(${name} PROPERTIES POSITION_INDEPENDENT_CODE ON EXPORT_NAME ${_export})
  kvsim_target_warnings(${name})
  install(TARGETS ${name} EXPORT kvsimTargets ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
  if(KVSIM_UNITY_CORE)
    # At the end of the module's CMakeLists.txt, once its per-file properties are set (a file
    # with its own options stays out of the batches). A deferred call's arguments are expanded
    # when it runs, so the target's name is written into it now.
    cmake_language(EVAL CODE "cmake_language(DEFER CALL kvsim_unity_core [[${name}]])")
  endif()
endfunction()
