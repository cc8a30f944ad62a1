// Files embedded into the binary at build time (cl_kernels/*.cl, platforms/*.json).
#pragma once
#include <string>

namespace infinipot::embedded {
const char* find(const std::string& name);  // defined in the generated embedded_files.cpp
}

namespace infinipot::cl {
// The text of an embedded file; with INFINIPOT_KERNEL_DIR set (developer mode) .cl files are
// read from that directory instead, so kernels can be edited without rebuilding.
std::string embedded_text(const std::string& name);
}  // namespace infinipot::cl
