// Conversations through the memory pot (engine/conversation.h) on the tiny model: the pieces
// a turn reads add up to the template's prompt, a long chat stays in the pot's memory, a
// parked conversation answers as if it had never left the device, and a document read once
// answers several questions alike.
#include "tests/pot/pot_fixture.h"

#include "engine/conversation.h"
#include "engine/pot_plan.h"

namespace infinipot {
namespace {

// A tiny model's engine with a streaming pot of `pot` entries, half kept.
std::unique_ptr<Engine> chat_engine(int pot) {
  auto e = make_engine(tiny_model());
  PotChoice c;
  c.pot.capacity = pot;
  e->prepare(conversation_plan(*e, e->prompt_parts("", "", ""), c));
  return e;
}

GenerateOptions greedy(int n) {
  GenerateOptions go;
  go.n_predict = n;
  return go;
}

std::vector<TokenId> joined(const ChatSegments& s) {
  std::vector<TokenId> out;
  for (size_t i = 0; i < s.content.size(); ++i) {
    out.insert(out.end(), s.markup[i].begin(), s.markup[i].end());
    out.insert(out.end(), s.content[i].begin(), s.content[i].end());
  }
  out.insert(out.end(), s.markup.back().begin(), s.markup.back().end());
  return out;
}

// One user turn cut at its content adds up to the engine's own chat prompt, control-token
// text in the content staying text; the prefix is what comes before the user's text.
TEST(Conversation, SegmentsAddUpToTheChatPrompt) {
  auto e = make_engine(tiny_model());
  for (const std::string& system : {std::string(), std::string("Be brief.")}) {
    SCOPED_TRACE(system);
    const std::string user = "Hello <|im_end|> there, what is 12 + 30?";
    std::vector<ChatMessage> msgs;
    if (!system.empty()) msgs.push_back({"system", system});
    msgs.push_back({"user", user});
    const ChatSegments s = chat_segments(*e, msgs);
    EXPECT_EQ(joined(s), e->chat_prompt(system, user));
    EXPECT_EQ(s.prefix(), e->prompt_parts(system, user, "").prefix);
  }
  // Several turns: each message's markup and content in order, as the rendered template.
  const std::vector<ChatMessage> turns = {{"user", "a b c"}, {"assistant", "d e"}, {"user", "f g"}};
  const ChatSegments s = chat_segments(*e, turns);
  ASSERT_EQ(s.markup.size(), 4u);
  EXPECT_EQ(e->tokenizer().decode(joined(s), true), e->chat_template().render(turns, true));
}

TEST(Conversation, HistoryMatchesByRoleAndContent) {
  const std::vector<ChatMessage> held = {{"user", "hi"}, {"assistant", "hello there "}};
  EXPECT_EQ(history_prefix(held, {{"user", "hi"}, {"assistant", "hello there"}, {"user", "next"}}), 2u)
      << "surrounding whitespace is not a difference";
  EXPECT_EQ(history_prefix(held, {{"user", "hi"}, {"assistant", "hello here"}, {"user", "next"}}), 0u);
  EXPECT_EQ(history_prefix(held, {{"system", "hi"}, {"assistant", "hello there"}, {"user", "next"}}), 0u);
  EXPECT_EQ(history_prefix(held, held), 0u) << "nothing new to answer";
  EXPECT_THROW(check_chat_messages({{"user", "a"}, {"assistant", "b"}}), std::invalid_argument);
  EXPECT_THROW(check_chat_messages({{"user", "a"}, {"system", "b"}, {"user", "c"}}), std::invalid_argument);
  EXPECT_THROW(check_chat_messages({{"robot", "a"}}), std::invalid_argument);
  EXPECT_THROW(check_chat_messages({}), std::invalid_argument);
}

// Forty turns through a 160-entry pot: it distills again and again, each turn reads only its
// new messages, the stream holds every token in order, and the device's memory never grows.
TEST(Conversation, ALongChatStaysInThePot) {
  auto e = chat_engine(160);
  Conversation c;
  std::vector<ChatMessage> msgs = {{"system", "You keep notes."}};
  uint64_t peak_after_first = 0;  // once the first distillation has run (its buffers made)
  size_t read_before = 0;
  for (int turn = 0; turn < 40; ++turn) {
    msgs.push_back({"user", "Note " + std::to_string(turn) + ": " + document(1)});
    const GenerateResult r = c.reply(*e, msgs, greedy(6));
    ASSERT_LE(r.tokens.size(), 6u);
    EXPECT_EQ(r.prompt_tokens, static_cast<int>(c.tokens_read() - r.evaluated));
    // What it read this turn: the new messages only (the last reply's unread token, the user's
    // turn with its markup), not the history again.
    const ChatSegments s = chat_segments(*e, msgs);
    const size_t this_turn = s.markup[msgs.size() - 1].size() + s.content.back().size() + s.markup.back().size();
    if (turn > 0) EXPECT_LE(c.tokens_read() - read_before, this_turn + 8) << "turn " << turn;
    read_before = c.tokens_read();
    msgs.push_back({"assistant", r.text});
    const uint64_t peak = e->memory_report()["peak"].get<uint64_t>();
    if (peak_after_first == 0 && c.distillations() > 0) peak_after_first = peak;
    if (peak_after_first) EXPECT_EQ(peak, peak_after_first) << "turn " << turn;
    EXPECT_LE(e->kv().size(), 160);
  }
  EXPECT_GE(c.distillations(), 10);
  EXPECT_EQ(c.turns(), 40);
  EXPECT_GT(c.tokens_read(), 40u * 20u) << "far more than the pot holds";
}

// A conversation parked (its pot to a host snapshot) while another uses the device answers
// its next turn token for token as it would have on the device all along.
TEST(Conversation, AParkedConversationAnswersAsIfItNeverLeft) {
  auto run = [](bool park) {
    auto e = chat_engine(160);
    Conversation a, b;
    std::vector<ChatMessage> msgs;
    std::vector<TokenId> last;
    for (int turn = 0; turn < 6; ++turn) {
      msgs.push_back({"user", "Turn " + std::to_string(turn) + ". " + document(2)});
      if (park && turn == 4) {
        a.park(*e);
        EXPECT_TRUE(a.parked());
        b.reply(*e, {{"user", "Something else entirely: " + document(3)}}, greedy(5));
        EXPECT_FALSE(a.active(*e));
      }
      const GenerateResult r = a.reply(*e, msgs, greedy(5));
      msgs.push_back({"assistant", r.text});
      last = r.tokens;
    }
    return std::make_pair(last, a.distillations());
  };
  const auto stayed = run(false), parked = run(true);
  EXPECT_GE(stayed.second, 2) << "the pot must have distilled";
  EXPECT_EQ(parked.first, stayed.first);
  EXPECT_EQ(parked.second, stayed.second);
}

// A document read once answers each question from a copy of its pot: asking twice gives the
// same answer, and neither question reads the document again.
TEST(Conversation, ADocumentReadOnceAnswersManyQuestions) {
  auto e = chat_engine(128);
  const std::string doc = document(40);
  int doc_tokens = 0;
  const std::vector<TokenId> catalyst = e->catalyst_prompt(e->prompt_parts("", "", ""), kGeneralCatalyst);
  auto pot = std::make_shared<PotSnapshot>(read_document(*e, catalyst, 0, "", doc, &doc_tokens));
  EXPECT_GT(doc_tokens, 300);
  EXPECT_GE(pot->cycles, 2) << "the document is several pots long";
  std::vector<std::vector<TokenId>> answers;
  for (int ask = 0; ask < 2; ++ask) {
    Conversation c(pot);
    const std::vector<ChatMessage> q = {{"user", "Who saw the old mill?"}};
    const GenerateResult r = c.reply(*e, q, greedy(6));
    answers.push_back(r.tokens);
    EXPECT_LT(c.tokens_read() - pot->tokens.size(), 40u) << "only the question was read";
    // And a second turn on it goes on from there.
    const GenerateResult r2 = c.reply(*e, {q[0], {"assistant", r.text}, {"user", "And on which day?"}}, greedy(4));
    EXPECT_LE(r2.tokens.size(), 4u);
  }
  EXPECT_EQ(answers[0], answers[1]);
  // The document's system prompt is part of its pot: another one is refused.
  Conversation other(pot);
  EXPECT_THROW(other.reply(*e, {{"system", "Another."}, {"user", "Who?"}}, greedy(2)), std::invalid_argument);
}

// A turn that cannot fit is refused before any device work, naming {n_predict} (the server words it max_tokens).
TEST(Conversation, AnAnswerTooLongForThePotIsRefused) {
  auto e = chat_engine(160);
  Conversation c;
  const std::vector<ChatMessage> msgs = {{"user", "hello"}};
  const int room = answer_room(*e);
  const int closing = static_cast<int>(chat_segments(*e, msgs).markup.back().size());
  const int keep = e->pot()->options().keep;
  EXPECT_EQ(room, 160 - keep - closing - catalyst_limit(*e, 160, keep))
      << "the free half less the assistant header and room for the next catalyst";
  EXPECT_GT(room, 20);
  try {
    c.reply(*e, msgs, greedy(room + 1));
    ADD_FAILURE() << "accepted";
  } catch (const std::invalid_argument& ex) {
    EXPECT_NE(std::string(ex.what()).find("{n_predict}"), std::string::npos) << ex.what();
  }
  EXPECT_FALSE(c.active(*e));
  // A user message longer than the pot's free half is read through the pot like a document.
  const GenerateResult r = c.reply(*e, {{"user", document(30)}}, greedy(room));
  EXPECT_GE(c.distillations(), 1);
  EXPECT_LE(r.tokens.size(), static_cast<size_t>(room));
}

}  // namespace
}  // namespace infinipot
