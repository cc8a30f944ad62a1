#include "runtime/icd_check.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace infinipot::cl {
namespace fs = std::filesystem;

namespace {

// OpenCL driver libraries of the vendors the tuning table knows, and PoCL / Mesa on the CPU.
const char* const kDriverLibraries[] = {
    "libnvidia-opencl.so.1", "libamdocl64.so", "libigdrcl.so",     "libmali.so",
    "libPVROCL.so.1",        "libpocl.so.2",   "librusticlOpenCL.so.1",
};

// Where distributions and containers put them.
const char* const kDriverDirs[] = {
    "/usr/lib/x86_64-linux-gnu",  "/usr/lib/aarch64-linux-gnu", "/usr/lib/x86_64-linux-gnu/intel-opencl",
    "/usr/lib64",                 "/usr/lib",                   "/usr/local/nvidia/lib64",
    "/usr/lib/x86_64-linux-gnu/nvidia/current", "/opt/rocm/lib", "/vendor/lib64",
};

std::string first_line(const fs::path& p) {
  std::ifstream in(p);
  std::string line;
  std::getline(in, line);
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) line.pop_back();
  return line;
}

IcdFile check_file(const fs::path& icd) {
  IcdFile f;
  f.path = icd.string();
  f.library = first_line(icd);
  if (f.library.empty()) {
    f.load_error = "the file names no library";
    return f;
  }
  dlerror();
  // Kept loaded, as the ICD loader keeps its drivers (unloading a driver whose constructors
  // allocated would also leave LeakSanitizer with unreachable blocks).
  void* h = dlopen(f.library.c_str(), RTLD_LAZY | RTLD_LOCAL | RTLD_NODELETE);
  if (!h) {
    const char* e = dlerror();
    f.load_error = e ? e : "dlopen failed";
    return f;
  }
  void* entry = dlsym(h, "clGetExtensionFunctionAddress");
  if (!entry) entry = dlsym(h, "clIcdGetPlatformIDsKHR");
  f.has_entry = entry != nullptr;
  // The file the entry came from (dladdr, which bionic has too, unlike dlinfo).
  Dl_info info{};
  std::error_code ec;
  if (entry && dladdr(entry, &info) && info.dli_fname && *info.dli_fname)
    f.resolved = fs::canonical(info.dli_fname, ec).string();
  return f;
}

// Whether the .icd names this library file: by its path or name, or by another name of the same
// file (pocl.icd names libpocl.so.2.10.0, which libpocl.so.2 links to).
bool names(const IcdFile& f, const fs::path& lib) {
  if (f.library == lib.string() || f.library == lib.filename().string()) return true;
  std::error_code ec;
  return !f.resolved.empty() && fs::canonical(lib, ec).string() == f.resolved;
}

}  // namespace

IcdReport check_icd(const std::string& vendors, const std::vector<std::string>& driver_dirs) {
  IcdReport r;
  r.vendors = vendors;
  std::error_code ec;
  if (fs::is_regular_file(vendors, ec)) {
    r.vendors_exist = true;
    r.files.push_back(check_file(vendors));
  } else if (fs::is_directory(vendors, ec)) {
    r.vendors_exist = true;
    std::vector<fs::path> icds;
    for (const auto& e : fs::directory_iterator(vendors, ec))
      if (e.path().extension() == ".icd") icds.push_back(e.path());
    std::sort(icds.begin(), icds.end());
    for (const auto& p : icds) r.files.push_back(check_file(p));
  }
  for (const auto& dir : driver_dirs)
    for (const char* name : kDriverLibraries) {
      const fs::path lib = fs::path(dir) / name;
      if (!fs::exists(lib, ec)) continue;
      const bool registered = std::any_of(r.files.begin(), r.files.end(), [&](const IcdFile& f) { return names(f, lib); });
      const bool listed = std::find(r.unregistered.begin(), r.unregistered.end(), lib.string()) != r.unregistered.end();
      if (!registered && !listed) r.unregistered.push_back(lib.string());
    }
  return r;
}

IcdReport check_icd() {
  const char* env = std::getenv("OCL_ICD_VENDORS");
  IcdReport r = check_icd(env && *env ? env : "/etc/OpenCL/vendors",
                          std::vector<std::string>(std::begin(kDriverDirs), std::end(kDriverDirs)));
  r.from_env = env && *env;
  return r;
}

std::string IcdReport::describe() const {
  std::string s;
  if (from_env)
    s += "  OCL_ICD_VENDORS=" + vendors + " replaces the loader's usual /etc/OpenCL/vendors; unset it to use that.\n";
  if (!vendors_exist)
    s += "  The ICD loader reads " + vendors + ", which does not exist.\n";
  else if (files.empty())
    s += "  " + vendors + " holds no .icd file, so the ICD loader knows no driver.\n";
  for (const auto& f : files) {
    const std::string name = fs::path(f.path).filename().string();
    if (!f.load_error.empty())
      s += "  " + name + " names " + (f.library.empty() ? "nothing" : f.library) + ", which cannot be loaded: " +
           f.load_error + "\n";
    else if (!f.has_entry)
      s += "  " + name + " names " + f.library + ", which loads but is no ICD driver (no clGetExtensionFunctionAddress).\n";
    else
      s += "  " + name + " names " + f.library +
           ", which loads but reported no platform or device (is the device present and may this user open it?).\n";
  }
  for (const auto& lib : unregistered) {
    std::string stem = fs::path(lib).filename().string();
    stem = stem.substr(3, stem.find('.') - 3);  // libnvidia-opencl.so.1 -> nvidia-opencl
    const std::string dir = vendors_exist && fs::is_directory(vendors) ? vendors : "/etc/OpenCL/vendors";
    s += "  " + lib + " is an OpenCL driver that no .icd file names; register it (as root): mkdir -p " + dir +
         " && echo " + lib + " > " + dir + "/" + stem + ".icd\n";
  }
  return s;
}

}  // namespace infinipot::cl
