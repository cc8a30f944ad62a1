// Human- and machine-readable summaries of a GGUF file, for `infinipot inspect`.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "model_loader/gguf.h"

namespace infinipot {

// {"runnable": bool, "cannot_run": why not (null when runnable; check_runnable in runnable.h),
//  "version", "alignment", "file_size", "data_offset",
//  "metadata": {key: value},
//  "tensors": [{"name", "type", "shape", "offset", "n_bytes"}]}
// Arrays longer than 16 elements become
//   {"type": "array", "elem_type": "string", "length": N, "head": [first 8 elements]}.
// Strings are made valid UTF-8 (invalid bytes become U+FFFD) so the result always dumps.
nlohmann::json inspect_json(const gguf::GgufFile& file);

// A readable summary: version and counts, the key hyperparameters and tokenizer settings,
// a tensor type histogram and the total tensor bytes, then "runnable: yes ..." or
// "cannot run: <reason>".
std::string inspect_text(const gguf::GgufFile& file);

}  // namespace infinipot
