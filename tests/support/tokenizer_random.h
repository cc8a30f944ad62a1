// The random tokenizer cross-checks: rows [parse_special, text, ids...] that llama.cpp
// tokenized (scripts/reference/make_gemma_tokenizer_goldens.py, make_tokenizer_random.py),
// compared token for token with one of our tokenizers.
#pragma once
#include <nlohmann/json.hpp>

#include <string>

#include "model_loader/tokenizer.h"

namespace infinipot::test {

struct RandomStringsResult {
  size_t rows = 0, same = 0, tokens = 0;  // tokens: llama.cpp's, over every row
  std::string first_differences;          // the first few rows that differ, ours beside theirs
};

// Encodes each row's text without BOS, special tokens parsed where row[0] says, and compares
// with the ids in row[ids_column] (or row[2], the first vocabulary's, where that is null).
RandomStringsResult compare_random_strings(const Tokenizer& tok, const nlohmann::json& rows, size_t ids_column);

// tests/fixtures/tokenizer_random.json (make_tokenizer_random.py), parsed once; throws naming
// the script when it is missing.
const nlohmann::json& tokenizer_random_fixture();

// The column of `vocab`'s ids in that fixture's rows (2 + its place in "vocabs"); throws
// when the fixture has no such vocabulary.
size_t random_ids_column(const nlohmann::json& doc, const std::string& vocab);

}  // namespace infinipot::test
