# Cross-compiling for 64-bit ARM Linux (edge boards: Mali, Adreno, PowerVR, Vivante) with
# Debian's cross compilers and its multiarch arm64 libraries:
#   dpkg --add-architecture arm64 && apt-get update
#   apt-get install g++-aarch64-linux-gnu ocl-icd-opencl-dev:arm64 libclblast-dev:arm64 \
#     libfmt-dev:arm64 libpcre2-dev:arm64 libgtest-dev:arm64 libgmock-dev:arm64
#   cmake -S . -B build-aarch64 -G Ninja -DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/aarch64-linux-gnu.cmake
# scripts/test-aarch64.sh does all of it and runs the suite under qemu-aarch64.
# For a board's own sysroot (a vendor OpenCL driver), set CMAKE_SYSROOT to it.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)

set(INFINIPOT_CROSS_PREFIX aarch64-linux-gnu- CACHE STRING "Prefix of the cross compiler's programs")
set(CMAKE_C_COMPILER ${INFINIPOT_CROSS_PREFIX}gcc)
set(CMAKE_CXX_COMPILER ${INFINIPOT_CROSS_PREFIX}g++)

# Libraries and headers come from the target's directories only (multiarch: /usr/lib/
# aarch64-linux-gnu, or CMAKE_SYSROOT); programs the build runs come from the host.
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)
if(CMAKE_SYSROOT)
  set(ENV{PKG_CONFIG_SYSROOT_DIR} ${CMAKE_SYSROOT})
  set(ENV{PKG_CONFIG_LIBDIR} ${CMAKE_SYSROOT}/usr/lib/aarch64-linux-gnu/pkgconfig:${CMAKE_SYSROOT}/usr/share/pkgconfig)
else()
  set(ENV{PKG_CONFIG_LIBDIR} /usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig)
endif()

# Build-time tools (the kernel embedder) and the tests run through this when set, e.g.
# -DCMAKE_CROSSCOMPILING_EMULATOR="qemu-aarch64;-L;/path/to/arm64-root".
