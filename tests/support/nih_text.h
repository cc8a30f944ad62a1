// Text helpers the nih and task tests share: a file's bytes as a string, counting a text's
// occurrences, and the prose haystack both build their documents from (KJV Genesis).
#pragma once
#include <fstream>
#include <sstream>
#include <string>

#include "engine/nih.h"

namespace infinipot::test {

inline std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline size_t occurrences(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

inline nih::Haystack genesis() {
  return nih::prose_haystack("prose", read_all(std::string(INFINIPOT_TEST_SOURCE_DIR) + "/data/perplexity.txt"));
}

}  // namespace infinipot::test
