# Android on 64-bit ARM (Adreno, Mali, PowerVR phones) through the NDK's own toolchain file.
# Not built in CI (the NDK is not a Debian package); docs/cross-compiling.md says what it needs:
#   cmake -S . -B build-android -G Ninja -DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/android-arm64.cmake \
#     -DANDROID_NDK=/path/to/ndk -DINFINIPOT_ANDROID_DEPS=/path/to/deps-prefix
if(NOT ANDROID_NDK)
  set(ANDROID_NDK $ENV{ANDROID_NDK})
endif()
if(NOT EXISTS "${ANDROID_NDK}/build/cmake/android.toolchain.cmake")
  message(FATAL_ERROR "android-arm64.cmake: set ANDROID_NDK (-DANDROID_NDK=... or the environment) to an "
                      "Android NDK (r25 or newer); '${ANDROID_NDK}' has no build/cmake/android.toolchain.cmake")
endif()
set(ANDROID_ABI arm64-v8a CACHE STRING "")
# API 28 (Android 9): the first with a public libOpenCL.so search on most vendors' images.
set(ANDROID_PLATFORM android-28 CACHE STRING "")
set(ANDROID_STL c++_shared CACHE STRING "")
include("${ANDROID_NDK}/build/cmake/android.toolchain.cmake")
# OpenCL (headers + the device's libOpenCL.so or an ICD loader), CLBlast, fmt, CLI11,
# nlohmann_json, PCRE2 and GoogleTest built for arm64-v8a and installed under one prefix.
set(INFINIPOT_ANDROID_DEPS "" CACHE PATH "Prefix holding the dependencies built for Android arm64-v8a")
if(INFINIPOT_ANDROID_DEPS)
  list(APPEND CMAKE_FIND_ROOT_PATH "${INFINIPOT_ANDROID_DEPS}")
  set(ENV{PKG_CONFIG_LIBDIR} "${INFINIPOT_ANDROID_DEPS}/lib/pkgconfig")
  set(ENV{PKG_CONFIG_SYSROOT_DIR} "")
endif()
