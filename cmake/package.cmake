# `cmake --install`: libinfinipot (shared, or static with the internal archives it needs),
# include/infinipot.h, the infinipot program, a CMake package (find_package(infinipot) ->
# infinipot::infinipot) and a pkg-config file. The kernels and platform data are embedded in
# the library, so nothing else is installed.
include(CMakePackageConfigHelpers)

set(INFINIPOT_EXPORTED infinipot_c)
if(NOT INFINIPOT_SHARED_LIB)
  # A static libinfinipot needs the layers below it at link time: installed beside it.
  list(APPEND INFINIPOT_EXPORTED infinipot_engine infinipot_pot infinipot_runtime infinipot_model_loader)
endif()
install(TARGETS ${INFINIPOT_EXPORTED} EXPORT infinipotTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(FILES ${CMAKE_SOURCE_DIR}/include/infinipot.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT infinipotTargets NAMESPACE infinipot:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/infinipot)
configure_package_config_file(${CMAKE_SOURCE_DIR}/cmake/infinipotConfig.cmake.in
  ${CMAKE_BINARY_DIR}/infinipotConfig.cmake INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/infinipot)
write_basic_package_version_file(${CMAKE_BINARY_DIR}/infinipotConfigVersion.cmake VERSION 0.1.0
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/infinipotConfig.cmake ${CMAKE_BINARY_DIR}/infinipotConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/infinipot)

if(INFINIPOT_SHARED_LIB)
  set(INFINIPOT_PC_LIBS "-linfinipot")
  set(INFINIPOT_PC_PRIVATE "")
else()
  set(INFINIPOT_PC_LIBS "-linfinipot -linfinipot_engine -linfinipot_pot -linfinipot_runtime -linfinipot_model_loader")
  set(INFINIPOT_PC_PRIVATE "-lclblast -lOpenCL -lfmt -lpcre2-8 -lpthread -lstdc++ -lm")
endif()
configure_file(${CMAKE_SOURCE_DIR}/cmake/infinipot.pc.in ${CMAKE_BINARY_DIR}/infinipot.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/infinipot.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
