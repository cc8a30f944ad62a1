// Checked reads of GGUF hyperparameters, shared by the model description and the family
// table: each error starts with the file's name and says which key is wrong and what was
// expected (a GgufError).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "model_loader/gguf.h"

namespace infinipot::meta {

[[noreturn]] void fail(const gguf::GgufFile& f, const std::string& msg);
std::string shape_str(const std::vector<int64_t>& shape);
// An integer hyperparameter in [lo, hi]; GgufFile's getter reports missing keys and types.
int get_int(const gguf::GgufFile& f, const std::string& key, int64_t lo, int64_t hi);
int get_int_or(const gguf::GgufFile& f, const std::string& key, int64_t lo, int64_t hi, int fallback);
// A positive finite float hyperparameter, `fallback` when the key is absent.
float get_positive_float_or(const gguf::GgufFile& f, const std::string& key, float fallback);

}  // namespace infinipot::meta
