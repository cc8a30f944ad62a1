// Lower layers name settings as {id}; each front-end words them (model_loader/setting_names.h).
// Also scans the sources below the front-ends: no string literal there names a CLI flag.
#include "model_loader/setting_names.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

namespace infinipot {
namespace {

TEST(SettingNames, WordsKnownIdsAndLeavesOtherBraces) {
  const SettingNames cli = {{"pot", "--pot"}, {"n_predict", "-n"}};
  EXPECT_EQ(worded("{pot} 64 cannot hold it; lower {n_predict}", cli), "--pot 64 cannot hold it; lower -n");
  // A setting id the table lacks reads as its plain name; braces that are no setting stay.
  EXPECT_EQ(worded("raise {device_mem}; the needle's {key} stays", cli), "raise device_mem; the needle's {key} stays");
  EXPECT_EQ(worded("an open { brace and {pot", cli), "an open { brace and {pot");
  EXPECT_EQ(worded("", cli), "");
  const SettingNames c = {{"pot", "infinipot_session_options.pot"}};
  EXPECT_EQ(worded("{pot}{pot}", c), "infinipot_session_options.potinfinipot_session_options.pot");
}

// "--pot", "-n 8" in a string literal of model_loader/, runtime/, pot/, engine/ or server/:
// those layers raise errors naming {pot}, and the front-end words them.
TEST(SettingNames, NoCliFlagInLowerLayerStrings) {
  const std::filesystem::path root = INFINIPOT_TEST_SOURCE_DIR;
  const std::regex literal("\"((?:[^\"\\\\]|\\\\.)*)\"");
  // --long flags, and the CLI's short ones (-c, -f, -m, -n, -p, -q) as a word of their own;
  // a shell command's (`mkdir -p` in a driver's install hint) is not the CLI's.
  const std::regex flag("(^|[ (`'])(--[a-z][a-z-]+|-[cfmnpq](?![a-zA-Z0-9_-]))");
  int scanned = 0;
  std::vector<std::string> found;
  for (const char* layer : {"model_loader", "runtime", "pot", "engine", "server"}) {
    for (const auto& entry : std::filesystem::recursive_directory_iterator(root / layer)) {
      const std::string ext = entry.path().extension().string();
      if (ext != ".cpp" && ext != ".h") continue;
      std::ifstream in(entry.path());
      std::string line;
      int number = 0;
      ++scanned;
      while (std::getline(in, line)) {
        ++number;
        const size_t code = line.find_first_not_of(" \t");
        if (code == std::string::npos || line.compare(code, 2, "//") == 0) continue;
        for (auto it = std::sregex_iterator(line.begin(), line.end(), literal); it != std::sregex_iterator(); ++it)
          if (const std::string text = (*it)[1].str(); std::regex_search(text, flag) &&
                                                      !std::regex_search(text, std::regex("mkdir -p")))
            found.push_back(entry.path().lexically_relative(root).string() + ":" + std::to_string(number) + ": " +
                            (*it)[0].str());
      }
    }
  }
  EXPECT_GT(scanned, 100) << "the source tree was not found under " << root;
  std::ostringstream list;
  for (const std::string& f : found) list << "\n  " << f;
  EXPECT_TRUE(found.empty()) << "CLI flags below the front-ends (write {id}, see model_loader/setting_names.h):"
                             << list.str();
}

}  // namespace
}  // namespace infinipot
