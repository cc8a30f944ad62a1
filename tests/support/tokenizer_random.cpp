#include "tests/support/tokenizer_random.h"

#include <fstream>
#include <stdexcept>
#include <vector>

namespace infinipot::test {
namespace {

std::string describe(const std::vector<TokenId>& ids) {
  std::string out = "[";
  for (size_t i = 0; i < ids.size(); ++i) out += (i ? ", " : "") + std::to_string(ids[i]);
  return out + "]";
}

}  // namespace

RandomStringsResult compare_random_strings(const Tokenizer& tok, const nlohmann::json& rows, size_t ids_column) {
  RandomStringsResult r;
  r.rows = rows.size();
  for (size_t i = 0; i < rows.size(); ++i) {
    const bool parse_special = rows[i].at(0).get<int>() != 0;
    const std::string text = rows[i].at(1).get<std::string>();
    // null: the same ids as the first vocabulary's (tokenizer_random.json's "same_as_first")
    const nlohmann::json& cell = rows[i].at(ids_column).is_null() ? rows[i].at(2) : rows[i].at(ids_column);
    const auto want = cell.get<std::vector<TokenId>>();
    const auto ids = tok.encode(text, /*add_bos=*/false, parse_special);
    r.tokens += want.size();
    if (ids == want) {
      ++r.same;
    } else if (r.first_differences.size() < 2000) {
      r.first_differences += "  #" + std::to_string(i) + " " + nlohmann::json(text).dump() + "\n    ours      " +
                             describe(ids) + "\n    llama.cpp " + describe(want) + "\n";
    }
  }
  return r;
}

const nlohmann::json& tokenizer_random_fixture() {
  static const nlohmann::json doc = [] {
    const std::string path = std::string(INFINIPOT_TEST_SOURCE_DIR) + "/tests/fixtures/tokenizer_random.json";
    std::ifstream in(path);
    if (!in) throw std::runtime_error("cannot open " + path + " (made by scripts/reference/make_tokenizer_random.py)");
    return nlohmann::json::parse(in);
  }();
  return doc;
}

size_t random_ids_column(const nlohmann::json& doc, const std::string& vocab) {
  const auto& vocabs = doc.at("vocabs");
  for (size_t i = 0; i < vocabs.size(); ++i)
    if (vocabs[i].at("name") == vocab) return 2 + i;
  throw std::runtime_error("tokenizer_random.json has no vocabulary " + vocab);
}

}  // namespace infinipot::test
