// check_icd: what the "no OpenCL device" error says about the ICD loader's vendor files and
// the driver libraries on disk (runtime/icd_check.h), on folders the tests make.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "runtime/icd_check.h"
#include "tests/support/gguf_test_util.h"

namespace infinipot {
namespace {

using cl::check_icd;
using test::TempDir;

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(IcdCheck, AMissingOrEmptyVendorFolderIsSaidSo) {
  TempDir dir;
  const auto missing = check_icd(dir.file("nope"), {});
  EXPECT_FALSE(missing.vendors_exist);
  EXPECT_TRUE(has(missing.describe(), dir.file("nope") + ", which does not exist")) << missing.describe();
  const auto empty = check_icd(dir.path(), {});
  EXPECT_TRUE(empty.vendors_exist);
  EXPECT_TRUE(empty.files.empty());
  EXPECT_TRUE(has(empty.describe(), "holds no .icd file")) << empty.describe();
}

TEST(IcdCheck, EachIcdFileSaysWhetherItsLibraryLoads) {
  TempDir dir;
  std::ofstream(dir.file("bogus.icd")) << "/nonexistent/libbogus-opencl.so \r\n";
  std::ofstream(dir.file("blank.icd")) << "\n";
  std::ofstream(dir.file("notadriver.icd")) << "libm.so.6\n";  // loads, exports no ICD entry
  std::ofstream(dir.file("readme.txt")) << "not an icd\n";
  const auto r = check_icd(dir.path(), {});
  ASSERT_EQ(r.files.size(), 3u);  // sorted by name; readme.txt is not read
  EXPECT_EQ(r.files[0].library, "");
  EXPECT_FALSE(r.files[0].load_error.empty());
  EXPECT_EQ(r.files[1].library, "/nonexistent/libbogus-opencl.so") << "trailing blanks and CR trimmed";
  EXPECT_TRUE(has(r.files[1].load_error, "libbogus-opencl.so")) << r.files[1].load_error;
  EXPECT_TRUE(r.files[2].load_error.empty()) << r.files[2].load_error;
  EXPECT_FALSE(r.files[2].has_entry);
  const std::string text = r.describe();
  EXPECT_TRUE(has(text, "bogus.icd names /nonexistent/libbogus-opencl.so, which cannot be loaded")) << text;
  EXPECT_TRUE(has(text, "blank.icd names nothing")) << text;
  EXPECT_TRUE(has(text, "notadriver.icd names libm.so.6, which loads but is no ICD driver")) << text;
}

// The machine's own vendor files (the tests run on PoCL, whose .icd names a real driver): a
// real driver exports the entry point, and a single .icd file works as OCL_ICD_VENDORS does.
TEST(IcdCheck, ARealDriverExportsTheIcdEntry) {
  int drivers = 0;
  for (const auto& e : std::filesystem::directory_iterator("/etc/OpenCL/vendors")) {
    if (e.path().extension() != ".icd") continue;
    const auto r = check_icd(e.path().string(), {});
    ASSERT_EQ(r.files.size(), 1u);
    if (!r.files[0].load_error.empty()) continue;  // a vendor file whose driver is not installed
    EXPECT_TRUE(r.files[0].has_entry) << e.path();
    EXPECT_TRUE(has(r.describe(), "loads but reported no platform or device")) << r.describe();
    // The library it loaded, under any of its names in its folder, counts as registered.
    const std::filesystem::path real = r.files[0].resolved;
    ASSERT_FALSE(real.empty());
    EXPECT_TRUE(check_icd(e.path().string(), {real.parent_path().string()}).unregistered.empty())
        << "a driver the .icd names (through a symlink or not) reported as unregistered";
    ++drivers;
  }
  EXPECT_GE(drivers, 1) << "the tests need an installed ICD driver (pocl-opencl-icd)";
}

TEST(IcdCheck, DriverLibrariesNoIcdNamesAreFoundWithTheLineThatRegistersThem) {
  TempDir vendors, drivers;
  std::ofstream(drivers.file("libnvidia-opencl.so.1")) << "";
  std::ofstream(drivers.file("libpocl.so.2")) << "";
  std::ofstream(drivers.file("libunrelated.so")) << "";
  std::ofstream(vendors.file("pocl.icd")) << "libpocl.so.2\n";  // named by its bare name: registered
  const auto r = check_icd(vendors.path(), {drivers.path(), drivers.path()});
  ASSERT_EQ(r.unregistered.size(), 1u) << "listed once although its folder is given twice";
  EXPECT_EQ(r.unregistered[0], drivers.file("libnvidia-opencl.so.1"));
  EXPECT_TRUE(has(r.describe(), "register it (as root): mkdir -p " + vendors.path() + " && echo " +
                                    drivers.file("libnvidia-opencl.so.1") + " > " + vendors.path() +
                                    "/nvidia-opencl.icd"))
      << r.describe();
  // Named by its full path, it is registered too.
  std::ofstream(vendors.file("nvidia.icd")) << drivers.file("libnvidia-opencl.so.1") << "\n";
  EXPECT_TRUE(check_icd(vendors.path(), {drivers.path()}).unregistered.empty());
}

}  // namespace
}  // namespace infinipot
