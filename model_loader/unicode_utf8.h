// UTF-8 decoding/encoding as the tokenizer needs it, and GPT-2's byte <-> unicode table.
//
// Decoding is deliberately lenient in the same way as llama.cpp's tokenizer, because token ids
// must match it even for odd input: overlong forms and UTF-16 surrogates decode to whatever
// code point their bits spell, and a byte that cannot start a complete sequence becomes U+FFFD
// and the decoder moves on by one byte. One difference: a 4-byte form above U+10FFFF is
// treated as malformed here (llama.cpp decodes it and then throws while re-encoding it).
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace infinipot::utf8 {

constexpr uint32_t kReplacement = 0xFFFD;
constexpr uint32_t kMaxCodePoint = 0x10FFFF;

// Length of the sequence a lead byte announces (1 for ASCII and stray continuation bytes).
size_t sequence_length(uint8_t lead);

// Decodes the code point at `pos` and advances `pos` (see the leniency rules above).
uint32_t decode_lenient(std::string_view s, size_t& pos);

// Appends the UTF-8 form of cp (cp <= kMaxCodePoint; surrogates are encoded as 3 bytes).
void append(std::string& out, uint32_t cp);

// Strict validity (no overlongs, no surrogates, nothing above U+10FFFF).
bool is_valid(std::string_view s);

// GPT-2 byte-level alphabet: every byte maps to one printable code point. Printable Latin-1
// bytes map to themselves; the other 68 bytes map, in order, to U+0100 upwards.
class ByteAlphabet {
 public:
  static const ByteAlphabet& get();
  // UTF-8 text of the code point standing for byte b.
  const std::string& encode(uint8_t b) const { return byte_to_text_[b]; }
  // Byte a code point stands for, or -1 if it is not in the alphabet.
  int decode(uint32_t cp) const { return cp < cp_to_byte_.size() ? cp_to_byte_[cp] : -1; }

 private:
  ByteAlphabet();
  std::array<std::string, 256> byte_to_text_;
  std::array<int16_t, 0x144> cp_to_byte_;  // the alphabet ends at U+0143
};

}  // namespace infinipot::utf8
