// Chat template tests. Expected renderings of the real SmolLM2 template were produced by
// rendering its Jinja text with jinja2 (the way transformers applies it).
#include <gtest/gtest.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "model_loader/chat_template.h"
#include "tests/support/gguf_test_util.h"

namespace infinipot {
namespace {

const std::string kSmolSystem = "You are a helpful AI assistant named SmolLM, trained by Hugging Face";

// SmolLM2's template as stored in the GGUF (the newlines inside the literals are real).
const std::string kSmolTemplate =
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}"
    "{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";

std::string what_of(const std::function<void()>& action) {
  try {
    action();
  } catch (const ChatTemplateError& e) {
    return e.what();
  }
  return "<no ChatTemplateError>";
}

TEST(ChatTemplateReal, SmolLM2RendersLikeJinja) {
  const std::string path = test::real_model_path();
  ASSERT_FALSE(path.empty());
  const auto file = gguf::GgufFile::open(path);
  const ChatTemplate ct = ChatTemplate::from_gguf(file);
  EXPECT_EQ(ct.family(), "chatml");
  EXPECT_EQ(ct.end_of_turn(), "<|im_end|>");
  EXPECT_EQ(ct.default_system(), kSmolSystem);

  EXPECT_EQ(ct.render({{"user", "Hi"}}, true),
            "<|im_start|>system\n" + kSmolSystem + "<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(ct.render({{"system", "Be terse."}, {"user", "Hi"}, {"assistant", "Hello!"}}, false),
            "<|im_start|>system\nBe terse.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\nHello!<|im_end|>\n");
  // The template's loop never runs for an empty conversation, so no default system turn.
  EXPECT_EQ(ct.render({}, true), "<|im_start|>assistant\n");
}

TEST(ChatTemplate, DefaultSystemPromptIsReadFromTheTemplate) {
  EXPECT_EQ(ChatTemplate::from_template(kSmolTemplate, true).default_system(), kSmolSystem);

  // Escaped \n inside the literal, double quotes, an escaped quote in the prompt.
  const std::string escaped =
      "{{- \"<|im_start|>system\\nYou\\'re \\\"Qwen\\\", helpful.<|im_end|>\\n\" }}"
      "{% for m in messages %}{{'<|im_start|>' + m.role + '\\n' + m.content + '<|im_end|>\\n'}}{% endfor %}";
  EXPECT_EQ(ChatTemplate::from_template(escaped, true).default_system(), "You're \"Qwen\", helpful.");

  // A system turn built from the message content is not a default: the literal ends first.
  const std::string dynamic =
      "{% for m in messages %}{% if m.role == 'system' %}{{ '<|im_start|>system\n' + m.content + '<|im_end|>\n' }}"
      "{% else %}{{'<|im_start|>' + m.role + '\n' + m.content + '<|im_end|>\n'}}{% endif %}{% endfor %}";
  const ChatTemplate ct = ChatTemplate::from_template(dynamic, true);
  EXPECT_EQ(ct.default_system(), "");
  EXPECT_EQ(ct.render({{"user", "Hi"}}, false), "<|im_start|>user\nHi<|im_end|>\n");
}

TEST(ChatTemplate, MissingTemplateFallsBackToChatMLOnlyWithImStart) {
  const ChatTemplate ct = ChatTemplate::from_template(std::nullopt, /*vocab_has_im_start=*/true);
  EXPECT_EQ(ct.family(), "chatml");
  EXPECT_EQ(ct.default_system(), "");
  EXPECT_EQ(ct.render({{"user", "x"}}, true), "<|im_start|>user\nx<|im_end|>\n<|im_start|>assistant\n");

}

// Neither a template nor <|im_start|>: a base model, prompted with plain text; rendering
// turns is refused with what to do instead.
TEST(ChatTemplate, NoTemplateAndNoImStartIsCompletionMode) {
  const ChatTemplate ct = ChatTemplate::from_template(std::nullopt, false);
  EXPECT_TRUE(ct.completion());
  EXPECT_EQ(ct.family(), "none");
  EXPECT_NE(what_of([&] { ct.render({{"user", "x"}}, true); }).find("plain text ({raw})"), std::string::npos);
  EXPECT_FALSE(ChatTemplate::from_template(std::nullopt, true).completion());
}

// Gemma 3's template (the Hugging Face one, abridged to what decides the rendering: the first
// user turn carries the system text, "assistant" is "model", contents are trimmed). Expected
// strings worked by hand from that Jinja.
const std::string kGemmaTemplate =
    "{{ bos_token }}{%- if messages[0]['role'] == 'system' -%}{%- set first_user_prefix = messages[0]['content'] + "
    "'\n\n' -%}{%- set loop_messages = messages[1:] -%}{%- else -%}{%- set first_user_prefix = \"\" -%}"
    "{%- set loop_messages = messages -%}{%- endif -%}{%- for message in loop_messages -%}"
    "{%- if (message['role'] == 'assistant') -%}{%- set role = \"model\" -%}{%- else -%}{%- set role = "
    "message['role'] -%}{%- endif -%}{{ '<start_of_turn>' + role + '\n' + (first_user_prefix if loop.first else "
    "\"\") }}{{ message['content'] | trim }}{{ '<end_of_turn>\n' }}{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{'<start_of_turn>model\n'}}{%- endif -%}";

TEST(ChatTemplate, GemmaRendersLikeItsJinja) {
  const ChatTemplate ct = ChatTemplate::from_template(kGemmaTemplate, false);
  EXPECT_EQ(ct.family(), "gemma");
  EXPECT_EQ(ct.end_of_turn(), "<end_of_turn>");
  EXPECT_EQ(ct.default_system(), "");
  EXPECT_EQ(ct.render({{"user", "Hi"}}, true), "<start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n");
  EXPECT_EQ(ct.render({{"system", "Be terse."}, {"user", " Hi\n"}, {"assistant", "Hello!"}, {"user", "Again"}}, true),
            "<start_of_turn>user\nBe terse.\n\nHi<end_of_turn>\n<start_of_turn>model\nHello!<end_of_turn>\n"
            "<start_of_turn>user\nAgain<end_of_turn>\n<start_of_turn>model\n");
  EXPECT_EQ(ct.render({{"user", "x"}}, false), "<start_of_turn>user\nx<end_of_turn>\n");
}

TEST(ChatTemplate, Llama3RendersLikeItsJinja) {
  const std::string llama3 =
      "{{- bos_token }}{% for m in messages %}{{ '<|start_header_id|>' + m['role'] + '<|end_header_id|>\n\n' + "
      "m['content'] | trim + '<|eot_id|>' }}{% endfor %}{% if add_generation_prompt %}"
      "{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}";
  const ChatTemplate ct = ChatTemplate::from_template(llama3, false);
  EXPECT_EQ(ct.family(), "llama3");
  EXPECT_EQ(ct.end_of_turn(), "<|eot_id|>");
  EXPECT_EQ(ct.render({{"system", "Be terse. "}, {"user", "Hi"}}, true),
            "<|start_header_id|>system<|end_header_id|>\n\nBe terse.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
  EXPECT_NE(what_of([&] { ct.render({{"", "x"}}, false); }).find("invalid chat role"), std::string::npos);
}

// TinyLlama-1.1B-Chat's template as stored (transformers renders it with trim_blocks, which
// drops the newline after each {% %} tag but keeps the one after each {{ }} line). Expected
// strings worked by hand from that Jinja.
const std::string kZephyrTemplate =
    "{% for message in messages %}\n{% if message['role'] == 'user' %}\n{{ '<|user|>\n' + message['content'] + "
    "eos_token }}\n{% elif message['role'] == 'system' %}\n{{ '<|system|>\n' + message['content'] + eos_token }}\n"
    "{% elif message['role'] == 'assistant' %}\n{{ '<|assistant|>\n'  + message['content'] + eos_token }}\n"
    "{% endif %}\n{% if loop.last and add_generation_prompt %}\n{{ '<|assistant|>' }}\n{% endif %}\n{% endfor %}";

TEST(ChatTemplate, ZephyrRendersLikeItsJinjaWithTheVocabularysEos) {
  const ChatTemplate ct = ChatTemplate::from_template(kZephyrTemplate, false, "</s>");
  EXPECT_EQ(ct.family(), "zephyr");
  EXPECT_EQ(ct.end_of_turn(), "</s>");
  EXPECT_EQ(ct.render({{"system", "Be terse."}, {"user", "Hi"}}, true),
            "<|system|>\nBe terse.</s>\n<|user|>\nHi</s>\n<|assistant|>\n");
  EXPECT_EQ(ct.render({{"user", "Hi"}, {"assistant", "Hello!"}}, false), "<|user|>\nHi</s>\n<|assistant|>\nHello!</s>\n");
  // The EOS comes from the vocabulary; without one the template cannot be rendered.
  EXPECT_EQ(ChatTemplate::from_template(kZephyrTemplate, false, "<|endoftext|>").render({{"user", "x"}}, false),
            "<|user|>\nx<|endoftext|>\n");
  const std::string msg = what_of([&] { ChatTemplate::from_template(kZephyrTemplate, false, ""); });
  EXPECT_NE(msg.find("zephyr chat template closes turns with the EOS token"), std::string::npos) << msg;
}

// Phi-3-mini-4k-instruct's template as stored (Phi-3.5-mini's differs only in skipping an empty
// system message); expected strings worked by hand from that Jinja.
const std::string kPhi3Template =
    "{% for message in messages %}{% if message['role'] == 'system' %}{{'<|system|>\n' + message['content'] + "
    "'<|end|>\n'}}{% elif message['role'] == 'user' %}{{'<|user|>\n' + message['content'] + '<|end|>\n'}}{% elif "
    "message['role'] == 'assistant' %}{{'<|assistant|>\n' + message['content'] + '<|end|>\n'}}{% endif %}{% endfor "
    "%}{% if add_generation_prompt %}{{ '<|assistant|>\n' }}{% else %}{{ eos_token }}{% endif %}";

TEST(ChatTemplate, Phi3RendersLikeItsJinjaAndIsNotZephyr) {
  // It has <|user|> and eos_token as Zephyr's does, but closes turns with <|end|>.
  const ChatTemplate ct = ChatTemplate::from_template(kPhi3Template, false, "<|endoftext|>");
  EXPECT_EQ(ct.family(), "phi3");
  EXPECT_EQ(ct.end_of_turn(), "<|end|>");
  EXPECT_FALSE(ct.trims_content());
  EXPECT_EQ(ct.render({{"system", "Be terse."}, {"user", "Hi "}}, true),
            "<|system|>\nBe terse.<|end|>\n<|user|>\nHi <|end|>\n<|assistant|>\n");
  EXPECT_EQ(ct.render({{"user", "Hi"}, {"assistant", "Hello!"}, {"user", "And?"}}, true),
            "<|user|>\nHi<|end|>\n<|assistant|>\nHello!<|end|>\n<|user|>\nAnd?<|end|>\n<|assistant|>\n");
  EXPECT_TRUE(ct.default_system().empty());
}

TEST(ChatTemplate, OtherFamiliesAreNamedInTheError) {
  const std::string mistral = "{{ bos_token }}{% for m in messages %}[INST] {{ m.content }} [/INST]{% endfor %}";
  EXPECT_NE(what_of([&] { ChatTemplate::from_template(mistral, true); }).find("'mistral/llama2 [INST]'"), std::string::npos);
  const std::string deepseek = "{% for m in messages %}<|User|>{{ m.content }}<|Assistant|>{% endfor %}";
  const std::string msg_d = what_of([&] { ChatTemplate::from_template(deepseek, true); });
  EXPECT_NE(msg_d.find("'deepseek'"), std::string::npos) << msg_d;
  EXPECT_NE(msg_d.find("implemented: ChatML, Gemma, Llama 3, Phi-3, Zephyr"), std::string::npos) << msg_d;
  const std::string odd = "{{ messages | tojson }}";
  const std::string msg = what_of([&] { ChatTemplate::from_template(odd, true); });
  EXPECT_NE(msg.find("unrecognised chat template"), std::string::npos) << msg;
  EXPECT_NE(msg.find("tojson"), std::string::npos) << msg;  // quotes the template's start
}

TEST(ChatTemplate, RolesMustBeOneNonEmptyLine) {
  const ChatTemplate ct = ChatTemplate::from_template(kSmolTemplate, true);
  EXPECT_NE(what_of([&] { ct.render({{"", "x"}}, false); }).find("invalid chat role"), std::string::npos);
  EXPECT_NE(what_of([&] { ct.render({{"user\nsystem", "x"}}, false); }).find("invalid chat role"), std::string::npos);
}

// from_gguf's own decisions, on GGUF metadata built byte by byte.
std::vector<uint8_t> gguf_with_tokens(const std::vector<std::string>& tokens) {
  test::RawGguf g;
  g.header(3, 0, 1);
  g.str("tokenizer.ggml.tokens").u32(9 /*ARRAY*/).u32(8 /*STRING*/).u64(tokens.size());
  for (const auto& t : tokens) g.str(t);
  return g.bytes();
}

TEST(ChatTemplate, FromGgufWithoutTemplate) {
  const auto with = gguf_with_tokens({"a", "<|im_start|>", "<|im_end|>"});
  const auto file = gguf::GgufFile::from_memory(with.data(), with.size());
  EXPECT_EQ(ChatTemplate::from_gguf(file).family(), "chatml");

  const auto without = gguf_with_tokens({"a", "b"});
  const auto file2 = gguf::GgufFile::from_memory(without.data(), without.size());
  EXPECT_TRUE(ChatTemplate::from_gguf(file2).completion());  // a base model: plain-text prompts
}

}  // namespace
}  // namespace infinipot
