# What `cmake --install` writes, and the packages built from it:
#   bin/kvsim, share/kvsim/import_sglang.py
#   include/kvsim/{core,sim,conformance}/**.h     (include paths as in the tree: "core/...")
#   lib/libkvsim_*.a                              (one per core module, the simulator, the kit)
#   lib/cmake/kvsim/kvsimConfig.cmake + targets   (find_package(kvsim): kvsim::core, kvsim::sim,
#                                                  kvsim::conformance when built with tests)
#   lib/pkgconfig/kvsim.pc                        (core + simulator; the kit needs GTest and
#                                                  RapidCheck: use the CMake package for it)
# `cpack -G DEB` (or the `package` target) builds a .deb of the same tree (docs/outputs.md).
# The install rules themselves sit next to each target (kvsim_module, sim/, conformance/).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(KVSIM_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/kvsim)
install(EXPORT kvsimTargets NAMESPACE kvsim:: DESTINATION ${KVSIM_INSTALL_CMAKEDIR}
        FILE kvsimTargets.cmake)
set(KVSIM_WITH_CONFORMANCE ${KVSIM_TESTS})
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/kvsimConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/kvsimConfig.cmake
                              INSTALL_DESTINATION ${KVSIM_INSTALL_CMAKEDIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/kvsimConfigVersion.cmake
                                 VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/kvsimConfig.cmake ${PROJECT_BINARY_DIR}/kvsimConfigVersion.cmake
        DESTINATION ${KVSIM_INSTALL_CMAKEDIR})

# pkg-config: link order is dependency order (the simulator first, the common module last).
if(KVSIM_VERIFY)
  set(KVSIM_PC_VERIFY 1)
else()
  set(KVSIM_PC_VERIFY 0)
endif()
if(KVSIM_PROBES)
  set(KVSIM_PC_PROBES 1)
else()
  set(KVSIM_PC_PROBES 0)
endif()
configure_file(${CMAKE_CURRENT_LIST_DIR}/kvsim.pc.in ${PROJECT_BINARY_DIR}/kvsim.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/kvsim.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# CPack: a .deb of the installed tree. Build with `cmake --build <dir> --target package` or
# `cpack -G DEB` in the build directory.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME kvsim)
set(CPACK_PACKAGE_VENDOR "kvsim")
set(CPACK_PACKAGE_CONTACT "kvsim maintainers <kvsim@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "Hierarchical KV-cache core, deterministic simulator and component conformance kit")
set(CPACK_DEBIAN_PACKAGE_SECTION devel)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "nlohmann-json3-dev (>= 3.11)")
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "libgtest-dev, librapidcheck-dev, python3")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_OUTPUT_FILE_PREFIX ${PROJECT_BINARY_DIR}/packages)
include(CPack)
