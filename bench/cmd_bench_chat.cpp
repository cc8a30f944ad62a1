// `infinipot bench-chat`: a long conversation through the memory pot against llama.cpp's
// context shift. Each case is a conversation of --turns user turns of about --turn-tokens
// tokens of prose; turn 1 also gives a fact, and the turns in --ask ask for it. The pot
// conversation (engine/conversation.h) reads each turn once; the context-shift baseline keeps
// the system prompt and the latest messages that fit the same number of entries and reads them
// afresh every turn (what llama.cpp keeps when its context shift drops the oldest turns). It
// prints a table (recall per asked turn, time per turn, device bytes by turn) and, with
// --json FILE, one record per turn.
#include <algorithm>
#include <chrono>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <random>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "engine/conversation.h"
#include "pot/policy_spec.h"
#include "tools/cli_common.h"

namespace infinipot::cli {

namespace {

using nlohmann::json;

struct ChatBenchOpts {
  std::string model, device, device_mem, kv_type = "auto", haystack, json_path, policy = "infinipot";
  int pot = 1024, turns = 60, turn_tokens = 300, reply_tokens = 16, answer_tokens = 24;
  std::vector<int> ask = {10, 30, 60};
  std::vector<int> seeds = {1, 2};
  int wordings = 3;
  bool baseline = true;
};

// A fact, its question, and what an answer must contain, in one of the wordings.
struct Fact {
  std::string statement, question, value;
};

// Five-digit keys, worded as nih's pass key is and two other ways; the answer's form is asked
// for (a 135M chat model asked only "What is the pass key?" explains what a pass key is).
Fact make_fact(int wording, std::mt19937& rng) {
  static const char* what[] = {"the pass key", "the vault code", "the door code"};
  const std::string v = std::to_string(10000 + rng() % 90000), w = what[wording % 3];
  std::string cap = w;
  cap[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(cap[0])));
  return {cap + " is " + v + ". Remember it. " + v + " is " + w + ".",
          "What is " + w + "? Answer with the number only.", v};
}

bool contains_ci(std::string hay, std::string needle) {
  for (auto* s : {&hay, &needle}) std::transform(s->begin(), s->end(), s->begin(), [](unsigned char c) { return std::tolower(c); });
  return hay.find(needle) != std::string::npos;
}

// Consecutive slices of the haystack, about n tokens each, cut at spaces.
class Prose {
 public:
  Prose(const Engine& e, std::string text, size_t start) : e_(e), text_(std::move(text)), at_(start % text_.size()) {}
  std::string next(int tokens) {
    std::string out;
    while (static_cast<int>(e_.tokenizer().encode(out, false, false).size()) < tokens) {
      size_t end = text_.find(' ', std::min(text_.size(), at_ + 200));
      if (end == std::string::npos) end = text_.size();
      out += text_.substr(at_, end - at_);
      at_ = end >= text_.size() ? 0 : end;
    }
    return out;
  }

 private:
  const Engine& e_;
  std::string text_;
  size_t at_;
};

struct TurnRecord {
  int turn = 0;
  double seconds = 0, ttft_s = 0;
  int prompt_tokens = 0, read_tokens = 0, distillations = 0;
  uint64_t device_peak = 0, kv_bytes = 0;
  bool asked = false, recalled = false;
  std::string answer;
};

// The latest messages that fit `entries` beside the answer, after the system prompt.
std::vector<ChatMessage> context_shift(const Engine& e, const std::vector<ChatMessage>& all, int entries) {
  std::vector<ChatMessage> kept = {all.front()};
  std::vector<ChatMessage> tail = {all.back()};
  auto size_of = [&](const std::vector<ChatMessage>& head, const std::vector<ChatMessage>& rest) {
    std::vector<ChatMessage> m = head;
    m.insert(m.end(), rest.begin(), rest.end());
    const ChatSegments s = chat_segments(e, m);
    size_t n = 0;
    for (size_t i = 0; i < s.content.size(); ++i) n += s.markup[i].size() + s.content[i].size();
    return n + s.markup.back().size();
  };
  // Whole exchanges (an assistant reply and the user turn before it) leave together.
  for (size_t i = all.size() - 1; i-- > 1;) {
    std::vector<ChatMessage> more = tail;
    more.insert(more.begin(), all[i]);
    if (static_cast<int>(size_of(kept, more)) > entries) break;
    tail = std::move(more);
  }
  if (tail.front().role == "assistant") tail.erase(tail.begin());
  kept.insert(kept.end(), tail.begin(), tail.end());
  return kept;
}

std::vector<TurnRecord> run_case(Engine& e, const ChatBenchOpts& o, const PotChoice& choice, const Fact& fact,
                                 const std::string& haystack, int seed, bool shift) {
  Prose prose(e, haystack, static_cast<size_t>(seed) * 7919 * 13);
  std::vector<ChatMessage> msgs = {{"system", "You are a helpful assistant. Remember what the user tells you."}};
  auto conversation = std::make_unique<Conversation>();
  std::vector<TurnRecord> out;
  const int capacity = o.pot;
  if (shift) e.prepare(capacity);
  else e.prepare(conversation_plan(e, e.prompt_parts("", "", ""), choice));
  for (int turn = 1; turn <= o.turns; ++turn) {
    TurnRecord rec;
    rec.turn = turn;
    rec.asked = std::find(o.ask.begin(), o.ask.end(), turn) == o.ask.end() ? false : true;
    std::string text = turn == 1 ? fact.statement + "\n\n" : std::string();
    text += rec.asked ? fact.question : "Here is some more text:\n" + prose.next(o.turn_tokens);
    msgs.push_back({"user", text});
    GenerateOptions go;
    go.n_predict = rec.asked ? o.answer_tokens : o.reply_tokens;
    const auto t0 = std::chrono::steady_clock::now();
    const size_t before = conversation->tokens_read();
    GenerateResult r;
    if (shift) {
      // A fresh read, into a plain KV cache of as many entries, of what fits beside the answer.
      const ChatSegments s = chat_segments(e, context_shift(e, msgs, capacity - go.n_predict));
      std::vector<TokenId> prompt;
      for (size_t i = 0; i < s.content.size(); ++i) {
        prompt.insert(prompt.end(), s.markup[i].begin(), s.markup[i].end());
        prompt.insert(prompt.end(), s.content[i].begin(), s.content[i].end());
      }
      prompt.insert(prompt.end(), s.markup.back().begin(), s.markup.back().end());
      r = e.generate(prompt, go);
      rec.read_tokens = static_cast<int>(prompt.size());
    } else {
      r = conversation->reply(e, msgs, go);
      rec.read_tokens = static_cast<int>(conversation->tokens_read() - before);
    }
    rec.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    rec.ttft_s = r.ttft_s;
    rec.prompt_tokens = r.prompt_tokens;
    rec.distillations = shift ? 0 : conversation->distillations();
    const json mem = e.memory_report();
    rec.device_peak = mem.value("peak", uint64_t(0));
    rec.kv_bytes = mem["by_category"].contains("kv_cache") ? mem["by_category"]["kv_cache"].value("used", uint64_t(0)) : 0;
    rec.answer = r.text;
    rec.recalled = rec.asked && contains_ci(r.text, fact.value);
    msgs.push_back({"assistant", r.text});
    out.push_back(rec);
  }
  return out;
}

void run_bench_chat(const ChatBenchOpts& o) {
  Engine engine(engine_options(o.model, o.device, o.device_mem, 0, o.kv_type));
  const PolicySpec spec = parse_policy_spec(o.policy, o.pot, 0);
  PotChoice choice;
  choice.pot = spec.options();
  const std::string haystack = read_text_file(o.haystack.empty() ? data_path("data/perplexity.txt") : o.haystack, "--haystack");
  json records = json::array();
  struct Cell {
    int asked = 0, recalled = 0;
  };
  std::map<std::pair<std::string, int>, Cell> cells;  // (method, asked turn)
  std::map<std::string, std::vector<double>> early, late;
  std::map<std::string, std::pair<uint64_t, uint64_t>> peaks;  // first / last turn
  for (int seed : o.seeds)
    for (int w = 0; w < o.wordings; ++w) {
      std::mt19937 rng(static_cast<unsigned>(seed * 1000 + w));
      const Fact fact = make_fact(w, rng);
      for (bool shift : {false, true}) {
        if (shift && !o.baseline) continue;
        const std::string method = shift ? "context-shift" : spec.config();
        const std::vector<TurnRecord> turns = run_case(engine, o, choice, fact, haystack, seed, shift);
        std::string line = fmt::format("{} seed {} wording {}:", method, seed, w);
        for (const TurnRecord& t : turns) {
          records.push_back({{"method", method}, {"seed", seed}, {"wording", w}, {"fact", fact.value}, {"turn", t.turn},
                             {"seconds", t.seconds}, {"ttft_s", t.ttft_s}, {"prompt_tokens", t.prompt_tokens},
                             {"read_tokens", t.read_tokens}, {"distillations", t.distillations},
                             {"device_peak_bytes", t.device_peak}, {"kv_bytes", t.kv_bytes}, {"asked", t.asked},
                             {"recalled", t.recalled}, {"answer", t.asked ? t.answer : ""}});
          if (t.asked) {
            Cell& c = cells[{method, t.turn}];
            ++c.asked;
            c.recalled += t.recalled;
            line += fmt::format(" t{}={}", t.turn, t.recalled ? "yes" : "no");
          }
          if (t.turn >= 2 && t.turn <= 10) early[method].push_back(t.seconds);
          if (t.turn > o.turns - 10) late[method].push_back(t.seconds);
        }
        // Turn 10's peak: the first distillations have made their buffers by then.
        peaks[method] = {turns[std::min<size_t>(9, turns.size() - 1)].device_peak, turns.back().device_peak};
        std::cerr << line << " (" << turns.back().prompt_tokens << " tokens in the conversation)" << std::endl;
        if (!o.json_path.empty()) {
          std::ofstream f(o.json_path);
          f << records.dump(1, ' ', false, json::error_handler_t::replace) << "\n";
        }
      }
    }
  auto mean = [](const std::vector<double>& v) {
    double s = 0;
    for (double x : v) s += x;
    return v.empty() ? 0.0 : s / v.size();
  };
  std::cout << fmt::format("\nbench-chat: {} turns of ~{} tokens, pot {} entries, {} cases (seeds x wordings), device {}\n",
                           o.turns, o.turn_tokens, o.pot, o.seeds.size() * o.wordings, engine.device_name());
  std::cout << fmt::format("{:<28}", "method");
  for (int a : o.ask) std::cout << fmt::format(" {:>10}", "turn " + std::to_string(a));
  std::cout << fmt::format(" {:>12} {:>12} {:>14} {:>14}\n", "s/turn 2-10", "s/turn last10", "peak turn 10", "peak last");
  for (const auto& [method, pk] : peaks) {
    std::cout << fmt::format("{:<28}", method);
    for (int a : o.ask) {
      const Cell c = cells[{method, a}];
      std::cout << fmt::format(" {:>10}", std::to_string(c.recalled) + "/" + std::to_string(c.asked));
    }
    std::cout << fmt::format(" {:>12.2f} {:>12.2f} {:>14} {:>14}\n", mean(early[method]), mean(late[method]), pk.first,
                             pk.second);
  }
}

}  // namespace

void add_bench_chat_command(CLI::App& app) {
  auto o = std::make_shared<ChatBenchOpts>();
  CLI::App* sub = app.add_subcommand("bench-chat", "A long conversation through the pot vs context shift: recall of a "
                                                   "fact from turn 1, time per turn, device bytes by turn");
  sub->add_option("-m,--model", o->model, "GGUF model file (with a chat template)")->required();
  sub->add_option("--pot", o->pot, "Pot entries (the baseline keeps as many)")->capture_default_str()->check(CLI::Range(64, 1 << 20));
  sub->add_option("--policy", o->policy, "Pot policy, NAME or NAME:key=value")->capture_default_str();
  sub->add_option("--turns", o->turns, "User turns per conversation")->capture_default_str()->check(CLI::Range(2, 100000));
  sub->add_option("--turn-tokens", o->turn_tokens, "Tokens of prose per turn")->capture_default_str()->check(CLI::Range(1, 100000));
  sub->add_option("--ask", o->ask, "Turns that ask for the fact (comma list)")->delimiter(',')->capture_default_str();
  sub->add_option("--seeds", o->seeds, "Seeds (comma list): the fact's value and where the prose starts")->delimiter(',')
      ->capture_default_str();
  sub->add_option("--wordings", o->wordings, "Fact wordings per seed (pass key, vault code, door code)")
      ->capture_default_str()->check(CLI::Range(1, 3));
  sub->add_option("--reply-tokens", o->reply_tokens, "Tokens of each ordinary reply")->capture_default_str();
  sub->add_option("--answer-tokens", o->answer_tokens, "Tokens of the answers to the question")->capture_default_str();
  sub->add_option("--haystack", o->haystack, "UTF-8 prose the turns are cut from (default: data/perplexity.txt)");
  sub->add_option("--json", o->json_path, "Write one record per turn here (rewritten after each case)");
  sub->add_flag("!--no-baseline", o->baseline, "Skip the context-shift baseline");
  sub->add_option("--device", o->device, "OpenCL device: index or name substring");
  sub->add_option("--device-mem", o->device_mem, "Hard cap on device memory")->check(byte_size_validator());
  sub->add_option("--kv-type", o->kv_type, "KV element type: auto, f16, f32")->capture_default_str()
      ->check(CLI::IsMember({"auto", "f16", "f32"}));
  sub->callback([o] {
    for (int a : o->ask)
      if (a < 2 || a > o->turns)
        throw std::invalid_argument("--ask turns must lie in [2, --turns], got " + std::to_string(a));
    run_bench_chat(*o);
  });
}

}  // namespace infinipot::cli
