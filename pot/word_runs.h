// Word and number runs: which tokens the pot keeps or drops together (--pot-units).
// SmolLM2 writes " 29772." as " " "2" "9" "7" "7" "2" ".": a choice that keeps the digits but
// not the "." after them leaves a model that copies the number unable to tell where it ends
// (it answered "826363" for 82636 with every digit held), so a run carries the space token
// that opens a number and the punctuation that closes a word or number. A mark inside a
// word or number (uuids "da3d5ed3-df89-...", dates "2026-11-25", decimals, hyphenated names)
// does not end it: the letters or digits right after it continue the same run.
#pragma once
#include <optional>
#include <string>

namespace infinipot {

// What a token's text looks like at its edges, as bits.
constexpr unsigned char kStartsWord = 1;   // first byte a letter, digit or non-ASCII
constexpr unsigned char kEndsWord = 2;     // last byte one
constexpr unsigned char kStartsPunct = 4;  // first byte ASCII punctuation
constexpr unsigned char kOnlySpaces = 8;   // nothing but ' '
constexpr unsigned char kOnlyPunct = 16;   // nothing but ASCII punctuation

unsigned char token_edges(const std::string& text);

// What the pot keeps or drops together (--pot-units, PolicyParams::units).
//   word:  runs of letters and digits with the space token that opens a number, the marks
//          that close a word or number, and the marks inside one (the default);
//   plain: the same, but a mark inside a word ends its run ("2026-" "11": the rule until
//          2026-11-26, an ablation now);
//   alnum: letters and digits only (the rule before the marks, an ablation);
//   token: single tokens.
enum class UnitRule { Word, Plain, Alnum, Token };
const char* unit_rule_name(UnitRule rule);
std::optional<UnitRule> parse_unit_rule(const std::string& name);

// No run grows past this many tokens, whatever joins it. A uuid is about 35 of SmolLM2's
// tokens and an English word or number a few; text written without spaces (a line of CSV,
// minified code or JSON, base64, a hash list, Chinese or Japanese prose) would otherwise be
// one unit of thousands of tokens that shares one score and, once chosen, fills the keep
// budget with its own tail.
constexpr int kMaxRunTokens = 48;

// Whether a token with edges `cur` continues the run of the token before it (edges `prev`;
// prev_joined: whether that token continued a run itself; run_tokens: tokens in that run so
// far). Token: never.
bool joins_run(unsigned char prev, unsigned char cur, UnitRule rule, bool prev_joined, int run_tokens = 1);

// Where the run of the token at stream index `at` (edges `cur`) starts, given the token before
// it (edges `prev`, its run starting at `prev_start`): prev_start when it joins, else `at`.
// The one loop step the pot and the tests share.
int run_start(unsigned char prev, unsigned char cur, UnitRule rule, int prev_start, int at);

}  // namespace infinipot
