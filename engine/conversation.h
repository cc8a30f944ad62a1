// A conversation read turn by turn into the engine's memory pot (Engine::stream_*): each
// request brings the whole history, as OpenAI clients send it; the conversation reads only
// the messages it does not hold yet, so a chat of any length runs in the pot's fixed memory.
//   - The system prompt (the template's text up to the first user content) is pinned.
//   - Earlier messages are read whole when they fit beside the catalyst: a distillation comes
//     before a message, never inside the template's markup (a message longer than the pot's
//     free room is read through it like a document, distilling inside its text).
//   - The newest turn (user message, end of turn, assistant header) and the answer go in
//     whole after at most one distillation: never evicted while it is answered.
//   - CaP's catalyst is that newest turn (its last kCatalystQuestionTokens content tokens).
// The server (server/) keeps several conversations and parks the ones not on the device as
// pot snapshots; `infinipot chat` and the C API hold one.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/pot_plan.h"
#include "model_loader/chat_template.h"
#include "pot/pot_snapshot.h"

namespace infinipot {

// The conversation in the model's chat template, cut at the messages' contents: markup[i] is
// the template's text before message i's content (markup.back() follows the last one and opens
// the assistant's turn); content[i] the content's tokens (control-token text in it stays text).
struct ChatSegments {
  std::vector<std::vector<TokenId>> markup;   // messages.size() + 1
  std::vector<std::vector<TokenId>> content;  // messages.size()
  size_t first_turn = 0;  // index of the first message that is not a system message
  // The pinned prefix: everything before content[first_turn] (BOS, system prompt, user header).
  std::vector<TokenId> prefix() const;
};

// after_document: the first user message's content goes on from a document already read in
// the same turn ("\n\n" + content, as a question after a document).
// from: messages before it are held already; their pieces are left empty (not tokenized).
ChatSegments chat_segments(const Engine& engine, const std::vector<ChatMessage>& messages, bool after_document = false,
                           size_t from = 0);

// Reads a document through the engine's pot as the first user message's content (after the
// chat prefix of `system`, "" for the template's own), with this catalyst, and returns the pot
// as a snapshot: a Conversation(document) answers questions about it without reading it again.
// `cancelled` is asked between chunks of the engine's chunk size: true stops the reading with
// ReadCancelled (the engine's stream is then half read: begin a new one before using it).
struct ReadCancelled : std::runtime_error {
  using std::runtime_error::runtime_error;
};
PotSnapshot read_document(Engine& engine, const std::vector<TokenId>& catalyst, int question_rows,
                          const std::string& system, const std::string& text, int* document_tokens = nullptr,
                          const std::function<bool()>& cancelled = {});

// A request's messages checked as a chat: roles system/user/assistant, system messages only
// first, the last one a user's. Throws std::invalid_argument naming the message.
void check_chat_messages(const std::vector<ChatMessage>& messages);

// How many leading messages of `messages` equal `held` (role, content up to surrounding
// whitespace), when all of held does and something follows; 0 otherwise.
size_t history_prefix(const std::vector<ChatMessage>& held, const std::vector<ChatMessage>& messages);

// The most catalyst rows a turn's question contributes (its last tokens): a long message's
// end is what the answer will attend from, and the catalyst must leave room to read on. A
// quarter of the pot's free room at most, so that a small pot still has room for answers.
inline constexpr int kCatalystQuestionTokens = 96;
// The largest catalyst a turn may have in a pot of this capacity and keep: every answer
// leaves this much room free, so that the next turn's catalyst can run to distill.
int catalyst_limit(const Engine& engine, int capacity, int keep);

// The longest answer a turn has room for in the engine's pot: its free room after a
// distillation, less the assistant header and the next catalyst's room; 0 without a pot.
int answer_room(Engine& engine);

// The pot a conversation reads through (server, chat, bench-chat): the chat prefix pinned,
// keep entries left at a distillation (half by default), the rest for the newest turn and
// its answer.
PotPlan conversation_plan(const Engine& engine, const PromptParts& prefix, const PotChoice& choice);

class Conversation {
 public:
  Conversation() = default;
  // A conversation whose first user turn opens with a document read into a pot (a snapshot of
  // the stream after the chat prefix and the document; engine/conversation.cpp).
  explicit Conversation(std::shared_ptr<const PotSnapshot> document)
      : document_(std::move(document)), distillations_(document_ ? document_->cycles : 0) {}

  // How many leading messages of `messages` this conversation holds, when it holds a prefix
  // of them and something after it is new; 0 otherwise (a conversation it does not hold).
  size_t holds(const std::vector<ChatMessage>& messages) const;

  // Reads what it does not hold of `messages` (checked: holds() > 0, or nothing held yet)
  // into the engine's pot and answers the last message. The engine's pot must be this
  // conversation's (active) or it must be parked (restored here) or new (begun here).
  // Throws std::invalid_argument when the turn cannot fit (naming the message or max tokens).
  GenerateResult reply(Engine& engine, const std::vector<ChatMessage>& messages, const GenerateOptions& go);
  // The answer as the client saw it (cut at a stop sequence): what the next request's history
  // will say. Call after reply().
  void set_reply_text(const std::string& text);

  // Leaves the device: the pot's state goes to a host snapshot (parked). Call only while this
  // conversation is the engine's active stream.
  void park(Engine& engine);
  bool parked() const { return parked_ != nullptr; }
  // A copy that goes on independently (the C API's session fork): parked, with this one's
  // state (captured from the device when this one is active there; this one stays active).
  Conversation fork(Engine& engine) const;
  const PotSnapshot* parked_state() const { return parked_.get(); }
  // A parked state from elsewhere (a snapshot file written by an earlier server): the held
  // messages must be given with it.
  void adopt(std::shared_ptr<PotSnapshot> state, std::vector<ChatMessage> held, std::vector<TokenId> unread);
  // Whether the engine's pot holds this conversation now (its stream was not replaced since).
  bool active(const Engine& engine) const { return begun_ && on_stream_ == engine.stream_id(); }

  const std::vector<ChatMessage>& messages() const { return held_; }
  const std::vector<TokenId>& unread() const { return unread_; }
  size_t tokens_read() const { return stream_.size(); }
  int turns() const { return turns_; }
  // Pot distillations in this conversation (as of its last turn).
  int distillations() const { return distillations_; }

 private:
  void begin(Engine& engine, const std::vector<TokenId>& prefix, const std::vector<TokenId>& catalyst, int rows);
  std::shared_ptr<const PotSnapshot> document_;
  std::shared_ptr<PotSnapshot> parked_;
  std::vector<ChatMessage> held_;  // messages read, the last reply as the client saw it
  std::vector<TokenId> stream_;    // every token in the pot's stream, in order
  std::vector<TokenId> unread_;    // reply tokens sampled but not yet in the pot
  bool begun_ = false;
  uint64_t on_stream_ = 0;         // Engine::stream_id() while the pot holds it
  int turns_ = 0;
  int distillations_ = 0;
};

}  // namespace infinipot
