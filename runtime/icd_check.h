// Why the OpenCL ICD loader found no platform, in words a user can act on: which .icd files it
// reads, whether the driver library each one names loads, and which driver libraries are on
// disk without an .icd file naming them (a container that mounts NVIDIA's driver, say, has
// libnvidia-opencl.so.1 but often no /etc/OpenCL/vendors/nvidia.icd).
#pragma once
#include <string>
#include <vector>

namespace infinipot::cl {

struct IcdFile {
  std::string path;        // /etc/OpenCL/vendors/pocl.icd
  std::string library;     // its first line: libpocl.so.2 or a full path
  std::string load_error;  // dlopen's words; empty when the library loads
  std::string resolved;    // the driver's real path (symlinks followed); empty unless it loads as a driver
  // It exports clGetExtensionFunctionAddress, through which the loader asks for
  // clIcdGetPlatformIDsKHR (or that entry itself).
  bool has_entry = false;
};

struct IcdReport {
  std::string vendors;     // the directory (or single .icd file) the loader reads
  bool vendors_exist = false;
  bool from_env = false;   // `vendors` came from OCL_ICD_VENDORS
  std::vector<IcdFile> files;
  std::vector<std::string> unregistered;  // driver libraries found that no .icd file names
  // One line per finding, each starting with two spaces, and what to do about it.
  std::string describe() const;
};

// Reads `vendors` (a directory of .icd files, or one .icd file, as OCL_ICD_VENDORS may be),
// tries to load each named library, and looks for the known driver libraries in driver_dirs.
IcdReport check_icd(const std::string& vendors, const std::vector<std::string>& driver_dirs);

// The same for this machine: OCL_ICD_VENDORS or /etc/OpenCL/vendors, the usual driver folders.
IcdReport check_icd();

}  // namespace infinipot::cl
