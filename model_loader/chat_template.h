// Chat formatting. We read tokenizer.chat_template and recognise the template family
// (ChatML for SmolLM2 and Qwen, Gemma, Llama 3, Phi-3, Zephyr for TinyLlama) rather than run a Jinja
// interpreter; an unknown template is an error that names it.
#pragma once
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>
#include "model_loader/gguf.h"

namespace infinipot {

class ChatTemplateError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct ChatMessage {
  std::string role;     // "system" | "user" | "assistant"
  std::string content;
};

class ChatTemplate {
 public:
  // ChatTemplateError for a template of another family (named when recognised). A file with
  // no template and no <|im_start|> to fall back to ChatML with is a base model: family
  // "none", prompted with plain text (completion()).
  static ChatTemplate from_gguf(const gguf::GgufFile& file);
  // The same decision from the template text (nullopt: the model has none), whether the
  // vocabulary has <|im_start|>, and its EOS token's text (Zephyr closes turns with it).
  static ChatTemplate from_template(const std::optional<std::string>& template_text, bool vocab_has_im_start,
                                    const std::string& eos_text = "</s>");
  // Renders the conversation; add_generation_prompt opens the assistant turn.
  // When the template inserts a default system prompt (SmolLM2 does) and messages have
  // none, it is inserted here too.
  std::string render(const std::vector<ChatMessage>& messages, bool add_generation_prompt) const;
  const std::string& family() const { return family_; }  // "chatml", "gemma", "llama3", "phi3", "zephyr" or "none"
  // No chat template: prompts are the text as is (base models); render() refuses.
  bool completion() const { return family_ == "none"; }
  // Whether render() trims each message's content (gemma, llama3 do; chatml, zephyr keep it).
  bool trims_content() const { return family_ == "gemma" || family_ == "llama3"; }
  const std::string& end_of_turn() const { return end_of_turn_; }  // "<|im_end|>", "<end_of_turn>", "<|eot_id|>", "<|end|>", EOS
  // System prompt the template inserts when the conversation has none; "" if it has none.
  const std::string& default_system() const { return default_system_; }

 private:
  std::string family_;
  std::string default_system_;
  std::string end_of_turn_;
  std::string eos_;  // the vocabulary's EOS text
};

}  // namespace infinipot
