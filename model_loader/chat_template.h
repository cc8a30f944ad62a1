// Chat formatting. We read tokenizer.chat_template and recognise the template family
// (ChatML for SmolLM2) rather than run a Jinja interpreter; an unknown template is an error
// that names it, unless the caller asks for raw prompts.
#pragma once
#include <string>
#include <vector>
#include "model_loader/gguf.h"

namespace infinipot {

struct ChatMessage {
  std::string role;     // "system" | "user" | "assistant"
  std::string content;
};

class ChatTemplate {
 public:
  static ChatTemplate from_gguf(const gguf::GgufFile& file);
  // Renders the conversation; add_generation_prompt opens the assistant turn.
  // When the template inserts a default system prompt (SmolLM2 does) and messages have
  // none, it is inserted here too.
  std::string render(const std::vector<ChatMessage>& messages, bool add_generation_prompt) const;
  const std::string& family() const { return family_; }       // "chatml"
  const std::string& end_of_turn() const { return end_of_turn_; }  // "<|im_end|>"

 private:
  std::string family_;
  std::string default_system_;
  std::string end_of_turn_;
};

}  // namespace infinipot
