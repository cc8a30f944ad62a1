// The tiny test model's tokenizer (tests/kit/tiny_model.h: a real byte-level BPE), built
// once, and a token counter over it: the nih and task tests measure documents with it.
#pragma once
#include <functional>
#include <string>

#include "model_loader/tokenizer.h"

namespace infinipot::test {

const Tokenizer& tiny_tokenizer();
// Tokens in a text as the engine counts them (no BOS, no special-token parsing).
std::function<int(const std::string&)> tiny_token_counter();

}  // namespace infinipot::test
