# kvsim_target_warnings(<target>): the project's warning set, applied to our own targets only.
function(kvsim_target_warnings target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wimplicit-fallthrough -Wno-missing-field-initializers>)
  if(KVSIM_WERROR)
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Werror>)
  endif()
endfunction()

# kvsim_module(<name> DEPS <libs...>): a static library from every .cpp in the current folder.
function(kvsim_module name)
  cmake_parse_arguments(ARG "" "" "DEPS" ${ARGN})
  file(GLOB _srcs CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/*.cpp)
  add_library(${name} STATIC ${_srcs})
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR})
  target_link_libraries(${name} PUBLIC ${ARG_DEPS})
  target_compile_definitions(${name} PUBLIC KVSIM_VERIFY=$<BOOL:${KVSIM_VERIFY}>
                                                   KVSIM_PROBES=$<BOOL:${KVSIM_PROBES}>)
  set_target_properties(${name} PROPERTIES POSITION_INDEPENDENT_CODE ON)
  kvsim_target_warnings(${name})
endfunction()
