// Whether this runtime can run a GGUF file. One function makes every check `run` makes before
// any device work (the llama config, the weight table with its shapes and device types, the
// tokenizer, the chat template); Engine loads through it and `inspect` reports its verdict,
// so the two can never disagree about a file.
#pragma once
#include <string>

#include "model_loader/chat_template.h"
#include "model_loader/gguf.h"
#include "model_loader/model_config.h"
#include "model_loader/tokenizer.h"

namespace infinipot {

// Everything the engine needs from the file before it touches a device. The weight table
// points into `file`, which must outlive it.
struct RunnableModel {
  LlamaConfig config;
  WeightTable weights;
  Tokenizer tokenizer;
  ChatTemplate chat_template;
};

// Throws the first check's error (gguf::GgufError, TokenizerError or ChatTemplateError),
// naming the key or tensor and what was expected.
RunnableModel load_runnable_model(const gguf::GgufFile& file);

struct Runnability {
  bool runnable = false;
  std::string reason;  // why not, without the file name prefix; empty when runnable
};

// load_runnable_model's verdict as a value: a model this runtime refuses is not an error here.
Runnability check_runnable(const gguf::GgufFile& file);

}  // namespace infinipot
