#include "model_loader/runnable.h"

#include <new>
#include <utility>

namespace infinipot {

RunnableModel load_runnable_model(const gguf::GgufFile& file) {
  LlamaConfig config = read_llama_config(file);
  WeightTable weights = map_weights(file, config);
  Tokenizer tokenizer = Tokenizer::from_gguf(file);
  ChatTemplate chat_template = ChatTemplate::from_gguf(file);
  return RunnableModel{std::move(config), std::move(weights), std::move(tokenizer), std::move(chat_template)};
}

Runnability check_runnable(const gguf::GgufFile& file) {
  try {
    load_runnable_model(file);
    return {true, ""};
  } catch (const std::bad_alloc&) {
    throw;  // out of memory says nothing about the file
  } catch (const std::exception& e) {
    std::string reason = e.what();
    // Model errors start with "<path>: "; the caller already shows which file this is.
    const std::string prefix = file.path() + ": ";
    if (reason.compare(0, prefix.size(), prefix) == 0) reason.erase(0, prefix.size());
    return {false, std::move(reason)};
  }
}

}  // namespace infinipot
