#include "model_loader/unicode_utf8.h"

namespace infinipot::utf8 {

size_t sequence_length(uint8_t lead) {
  if (lead < 0xC0) return 1;  // ASCII, or a continuation byte standing alone
  if (lead < 0xE0) return 2;
  if (lead < 0xF0) return 3;
  return 4;
}

namespace {
bool is_continuation(std::string_view s, size_t i) {
  return i < s.size() && (static_cast<uint8_t>(s[i]) & 0xC0) == 0x80;
}
}  // namespace

uint32_t decode_lenient(std::string_view s, size_t& pos) {
  const uint8_t b0 = static_cast<uint8_t>(s[pos]);
  if (b0 < 0x80) {
    pos += 1;
    return b0;
  }
  // Only the lead byte's announced length and the continuation bits are checked, like
  // llama.cpp: overlong forms and surrogates go through unchanged.
  if (b0 >= 0xC0 && b0 < 0xE0 && is_continuation(s, pos + 1)) {
    const uint32_t cp = (uint32_t(b0 & 0x1F) << 6) | (uint8_t(s[pos + 1]) & 0x3F);
    pos += 2;
    return cp;
  }
  if (b0 >= 0xE0 && b0 < 0xF0 && is_continuation(s, pos + 1) && is_continuation(s, pos + 2)) {
    const uint32_t cp = (uint32_t(b0 & 0x0F) << 12) | (uint32_t(uint8_t(s[pos + 1]) & 0x3F) << 6) |
                        (uint8_t(s[pos + 2]) & 0x3F);
    pos += 3;
    return cp;
  }
  if (b0 >= 0xF0 && b0 < 0xF8 && is_continuation(s, pos + 1) && is_continuation(s, pos + 2) &&
      is_continuation(s, pos + 3)) {
    const uint32_t cp = (uint32_t(b0 & 0x07) << 18) | (uint32_t(uint8_t(s[pos + 1]) & 0x3F) << 12) |
                        (uint32_t(uint8_t(s[pos + 2]) & 0x3F) << 6) | (uint8_t(s[pos + 3]) & 0x3F);
    if (cp <= kMaxCodePoint) {
      pos += 4;
      return cp;
    }
  }
  pos += 1;
  return kReplacement;
}

void append(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

bool is_valid(std::string_view s) {
  size_t pos = 0;
  while (pos < s.size()) {
    const size_t start = pos;
    const uint32_t cp = decode_lenient(s, pos);
    const size_t len = pos - start;
    if (cp == kReplacement && len == 1) return false;  // a malformed byte (a real U+FFFD is 3)
    // Overlong forms and surrogates decode leniently; reject them here.
    if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000)) return false;
    if (cp >= 0xD800 && cp <= 0xDFFF) return false;
  }
  return true;
}

const ByteAlphabet& ByteAlphabet::get() {
  static const ByteAlphabet alphabet;
  return alphabet;
}

ByteAlphabet::ByteAlphabet() {
  cp_to_byte_.fill(-1);
  // Bytes that are printable and not whitespace keep their own code point ('!'..'~',
  // U+00A1..U+00AC, U+00AE..U+00FF); the rest are shifted to U+0100.. in byte order, so that
  // every byte has a visible, non-space stand-in that BPE merges can be written with.
  uint32_t next_shifted = 0x100;
  for (int b = 0; b < 256; ++b) {
    const bool keeps_own = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
    const uint32_t cp = keeps_own ? uint32_t(b) : next_shifted++;
    append(byte_to_text_[b], cp);
    cp_to_byte_[cp] = static_cast<int16_t>(b);
  }
}

}  // namespace infinipot::utf8
