// libFuzzer target: arbitrary bytes through Tokenizer::encode (special-token parsing on and
// off) and back through decode. Besides crashes and sanitizer reports it checks that every id
// is in the vocabulary and that valid UTF-8 round-trips whenever each of its bytes has a
// byte-level token (SmolLM2's vocabulary lacks 21 of them, e.g. 0xF5..0xFF; llama.cpp drops
// such bytes and so do we).
//
// The tokenizer comes from $INFINIPOT_MODEL when set (the real SmolLM2 vocabulary), else from
// the tiny test model built in memory at start-up.
#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "model_loader/gguf.h"
#include "tests/kit/tiny_model.h"
#include "model_loader/tokenizer.h"
#include "model_loader/unicode_utf8.h"

namespace {

using infinipot::Tokenizer;
using infinipot::TokenId;

struct Fixture {
  std::vector<uint8_t> bytes;  // backing store of the in-memory tiny model
  std::unique_ptr<infinipot::gguf::GgufFile> file;
  std::unique_ptr<Tokenizer> tok;
  std::array<bool, 256> byte_has_token{};
};

const Fixture& fixture() {
  // Built once and never freed: inputs keep arriving until the process exits.
  static const Fixture* f = [] {
    auto* fx = new Fixture;
    const char* model = std::getenv("INFINIPOT_MODEL");
    if (model != nullptr && *model != '\0') {
      fx->file = std::make_unique<infinipot::gguf::GgufFile>(infinipot::gguf::GgufFile::open(model));
    } else {
      fx->bytes = infinipot::tiny_llama_bytes(infinipot::TinyLlamaOptions{});
      fx->file = std::make_unique<infinipot::gguf::GgufFile>(
          infinipot::gguf::GgufFile::from_memory(fx->bytes.data(), fx->bytes.size(), "tiny-llama"));
    }
    fx->tok = std::make_unique<Tokenizer>(Tokenizer::from_gguf(*fx->file));
    const auto& alphabet = infinipot::utf8::ByteAlphabet::get();
    for (int b = 0; b < 256; ++b) {
      fx->byte_has_token[b] = fx->tok->find_token(alphabet.encode(static_cast<uint8_t>(b))) >= 0;
    }
    std::fprintf(stderr, "fuzz_tokenizer: %s, %d tokens\n", model ? model : "tiny model", fx->tok->n_vocab());
    return fx;
  }();
  return *f;
}

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "fuzz_tokenizer: %s\n", what);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const Fixture& fx = fixture();
  const Tokenizer& tok = *fx.tok;
  const std::string text(reinterpret_cast<const char*>(data), size);

  bool round_trips = infinipot::utf8::is_valid(text);
  for (uint8_t b : text) round_trips = round_trips && fx.byte_has_token[b];

  for (bool parse_special : {true, false}) {
    const std::vector<TokenId> ids = tok.encode(text, /*add_bos=*/size % 2 == 1, parse_special);
    for (TokenId id : ids) {
      if (id < 0 || id >= tok.n_vocab()) fail("token id out of range");
    }
    std::vector<TokenId> body = ids;
    if (size % 2 == 1 && tok.bos() >= 0) {
      if (body.empty() || body.front() != tok.bos()) fail("BOS missing");
      body.erase(body.begin());
    }
    const std::string back = tok.decode(body, /*render_special=*/true);
    if (round_trips && back != text) fail("valid UTF-8 did not round-trip");
    (void)tok.decode(ids, /*render_special=*/false);
  }
  return 0;
}
