// Word and number runs: which tokens the pot keeps or drops together (--pot-units).
// SmolLM2 writes " 29772." as " " "2" "9" "7" "7" "2" ".": a choice that keeps the digits but
// not the "." after them leaves a model that copies the number unable to tell where it ends
// (it answered "826363" for 82636 with every digit held), so a run carries the space token
// that opens a number and the punctuation that closes a word or number.
#pragma once
#include <string>

namespace infinipot {

// What a token's text looks like at its edges, as bits.
constexpr unsigned char kStartsWord = 1;   // first byte a letter, digit or non-ASCII
constexpr unsigned char kEndsWord = 2;     // last byte one
constexpr unsigned char kStartsPunct = 4;  // first byte ASCII punctuation
constexpr unsigned char kOnlySpaces = 8;   // nothing but ' '

unsigned char token_edges(const std::string& text);

// Whether a token with edges `cur` continues the run of the token before it (edges `prev`).
// alnum_only: runs of letters and digits only (--pot-units alnum, the rule before the marks).
bool joins_run(unsigned char prev, unsigned char cur, bool alnum_only);

}  // namespace infinipot
