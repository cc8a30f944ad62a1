#include "engine/answer.h"
#include "model_loader/setting_names.h"

#include <algorithm>
#include <cstdio>
#include <stdexcept>

#include "pot/policy_registry.h"

namespace infinipot {

namespace {

// Where `watch` first occurs in the document, as stream indices [first, last] of the body
// tokens that cover it (body token i is stream index offset + i); {-1, -1} if absent.
std::pair<int, int> watch_span(const Tokenizer& tok, const std::vector<TokenId>& body, int offset,
                               const std::string& document, const std::string& watch) {
  const size_t at = document.find(watch);
  if (watch.empty() || at == std::string::npos) return {-1, -1};
  int first = -1, last = -1;
  size_t pos = 0;  // byte offset of token i in the decoded document
  for (size_t i = 0; i < body.size() && pos < at + watch.size(); ++i) {
    const size_t len = tok.decode_token(body[i]).size();
    if (pos + len > at && first < 0) first = offset + static_cast<int>(i);
    if (pos + len > at) last = offset + static_cast<int>(i);
    pos += len;
  }
  return {first, last};
}

// How much of the watched span each (layer, KV head) of the pot still holds.
nlohmann::json watch_report(const MemoryPot& pot, const LlamaConfig& cfg, std::pair<int, int> span) {
  if (span.first < 0) return {{"found", false}};
  const int n = span.second - span.first + 1;
  double kept = 0;
  int complete = 0;
  nlohmann::json per_layer = nlohmann::json::array();
  const int layers = cfg.n_global_layers();  // the pot holds the global layers (pot layer l: the l-th global one)
  for (int l = 0; l < layers; ++l) {
    double layer_kept = 0;
    for (int h = 0; h < cfg.n_head_kv; ++h) {
      int c = 0;
      for (int src : pot.sources(l, h)) c += src >= span.first && src <= span.second;
      layer_kept += double(c) / n;
      complete += c == n;
    }
    per_layer.push_back(layer_kept / cfg.n_head_kv);
    kept += layer_kept;
  }
  const int heads = layers * cfg.n_head_kv;
  return {{"found", true}, {"first_token", span.first}, {"tokens", n}, {"kept_fraction", kept / heads},
          {"heads_complete", double(complete) / heads}, {"kept_fraction_per_layer", per_layer}};
}

// The share of the catalyst's attention to the pot that falls on the watched span, per layer
// (the mean over its KV heads), from MemoryPot::catalyst_attention(); null when not measured.
nlohmann::json attention_report(const MemoryPot& pot, const LlamaConfig& cfg, std::pair<int, int> span,
                                const std::vector<float>& mass) {
  if (span.first < 0 || mass.empty()) return nullptr;
  const size_t capacity = pot.options().capacity;
  nlohmann::json per_layer = nlohmann::json::array();
  double sum = 0;
  for (int l = 0; l < cfg.n_global_layers(); ++l) {
    double layer_share = 0;
    for (int h = 0; h < cfg.n_head_kv; ++h) {
      const std::vector<int> src = pot.sources(l, h);
      const float* m = mass.data() + (size_t(l) * cfg.n_head_kv + h) * capacity;
      double on_span = 0, all = 0;
      for (size_t i = 0; i < src.size(); ++i) {
        all += m[i];
        if (src[i] >= span.first && src[i] <= span.second) on_span += m[i];
      }
      layer_share += all > 0 ? on_span / all : 0.0;
    }
    per_layer.push_back(layer_share / cfg.n_head_kv);
    sum += layer_share / cfg.n_head_kv;
  }
  return {{"share", sum / cfg.n_global_layers()}, {"share_per_layer", per_layer}};
}

// The text the pot holds in (layer, head): its entries' tokens in stream order, each run of
// dropped stream tokens shown as "[…N]". `stream` holds the tokens by stream index (prompt,
// then answer); an index past it (none should be) shows as "[?]".
std::string held_text(const Tokenizer& tok, const std::vector<int>& sources, const std::vector<TokenId>& stream) {
  std::string out;
  int next = 0;  // the stream index that follows the last entry shown
  for (const int src : sources) {
    if (src > next) out += "[\u2026" + std::to_string(src - next) + "]";
    out += src >= 0 && src < static_cast<int>(stream.size()) ? tok.decode_token(stream[src]) : std::string("[?]");
    next = src + 1;
  }
  return out;
}

// The pot's text (layer 0, head 0) and whether every layer and head holds the same entries
// (the default shared choice); per layer otherwise.
nlohmann::json text_report(const MemoryPot& pot, const LlamaConfig& cfg, const Tokenizer& tok,
                           const std::vector<TokenId>& stream) {
  const std::vector<int> first = pot.sources(0, 0);
  bool shared = true;
  for (int l = 0; l < cfg.n_global_layers() && shared; ++l)
    for (int h = 0; h < cfg.n_head_kv && shared; ++h) shared = pot.sources(l, h) == first;
  nlohmann::json r = {{"shared", shared}, {"text", held_text(tok, first, stream)}, {"entries", first.size()}};
  if (!shared) {  // each layer's own text (head 0)
    r["per_layer"] = nlohmann::json::array();
    for (int l = 0; l < cfg.n_global_layers(); ++l) r["per_layer"].push_back(held_text(tok, pot.sources(l, 0), stream));
  }
  return r;
}

std::string digest_hex(uint64_t h) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

nlohmann::json pot_report(const MemoryPot& pot, int catalyst_tokens) {
  const PotOptions& o = pot.options();
  const PotStats& s = pot.stats();
  return {{"policy", o.policy},             {"capacity", o.capacity},
          {"keep", o.keep},                 {"pinned", pot.pinned()},
          {"keep_auto", o.keep_auto},       {"kept_least", s.kept_least}, {"kept_most", s.kept_most},
          {"kept_mean", s.cycles ? double(s.kept_total) / s.cycles : 0.0},
          {"catalyst_tokens", catalyst_tokens}, {"nuc_ratio", o.params.nuc_ratio}, {"nuc_stride", o.params.nuc_stride},
          {"cr_rope", o.positions == PositionRule::Reset}, {"positions", position_rule_name(o.positions)},
          {"position_gap", o.position_gap},
          {"repositioned", s.repositioned}, {"cycles", s.cycles},
          {"tokens_read", s.tokens_read},   {"max_position", s.max_position},
          {"catalyst_s", s.catalyst_s},     {"novelty_s", s.novelty_s},
          {"compact_s", s.compact_s},       {"catalyst_fused", s.catalyst_fused},
          {"digest", digest_hex(pot.digest())}};
}

// --load-pot: the snapshot fixes the model, the chat prefix and the pot; only the question is new.
Answer answer_from_snapshot(Engine& engine, const std::string& question, const AnswerOptions& o,
                            const GenerateOptions& go) {
  const PotSnapshot snap = read_pot_snapshot(o.load_pot);
  if (snap.model_id != engine.model_id())
    throw std::invalid_argument("pot snapshot '" + o.load_pot + "' was saved with another model (" + snap.model_id +
                                ", this one is " + engine.model_id() + "): load it with the model it was made from");
  PotChoice choice;
  choice.pot = MemoryPot::options_from_settings(snap.settings);
  choice.pot.device_select = o.pot.device_select;
  choice.catalyst = o.catalyst;
  const PromptParts parts = engine.prompt_parts(o.system, "", question, o.raw);
  if (snap.tokens.size() < parts.prefix.size() ||
      !std::equal(parts.prefix.begin(), parts.prefix.end(), snap.tokens.begin()))
    throw std::invalid_argument("pot snapshot '" + o.load_pot + "' was saved with another chat prefix (system prompt "
                                "or {raw}): load it with the {system} / {raw} it was saved with");
  const PotPlan plan = PotPlan::restored(engine, parts, question, choice);
  engine.prepare(plan);
  Answer a;
  a.result = engine.generate_restored(parts, snap, plan.catalyst(), go, plan.question_rows());
  a.kv_capacity = plan.kv_capacity();
  a.pot = pot_report(*engine.pot(), static_cast<int>(plan.catalyst().size()));
  a.pot["ccd_cycles"] = engine.pot()->stats().cycles;
  a.pot["loaded_from"] = o.load_pot;
  return a;
}

PotChoice choice_of(const AnswerOptions& o) {
  PotChoice c;
  c.pot = o.pot;
  c.catalyst = o.catalyst;
  c.ctx = o.ctx;
  c.at_least = o.whole_capacity;
  return c;
}
}  // namespace

PotPlan answer_plan(const Engine& engine, const std::string& document, const std::string& question,
                    const AnswerOptions& o) {
  return PotPlan::make(engine, engine.prompt_parts(o.system, document, question, o.raw), question, choice_of(o),
                       o.n_predict);
}

Answer answer(Engine& engine, const std::string& document, const std::string& question, const AnswerOptions& o) {
  GenerateOptions go;
  go.n_predict = o.n_predict;
  go.sampler = o.sampler;
  go.on_text = o.on_text;
  go.cancelled = o.cancelled;
  go.ignore_eos = o.ignore_eos;
  if (!o.load_pot.empty()) return answer_from_snapshot(engine, question, o, go);
  go.on_prefill = o.on_prefill;
  const PromptParts parts = engine.prompt_parts(o.system, document, question, o.raw);
  const PotPlan plan = PotPlan::make(engine, parts, question, choice_of(o), o.n_predict);
  if (!plan.pot()) {
    if (!o.save_pot.empty())
      throw SettingError("save_pot", "", "", "{save_pot} saves a memory pot; {policy} " + o.pot.policy + " keeps none: give {pot} N");
    if (o.resume || o.after_chunk) throw std::logic_error("answer: the plan has no pot to share a document prefix in");
    if (!o.watch.empty() || !o.oracle.empty() || o.pot_text)
      throw std::logic_error("answer: watch, oracle and pot_text report on a pot; the plan has none");
    engine.prepare(plan);
    Answer a;
    a.result = engine.generate(parts, plan, go);
    a.kv_capacity = plan.kv_capacity();
    return a;
  }
  engine.prepare(plan);
  if (!o.save_pot.empty())
    go.after_read = [&](const std::vector<TokenId>& stream) {
      write_pot_snapshot(o.save_pot, engine.pot()->capture(stream, engine.model_id()));
    };
  if ((o.resume || o.after_chunk) && !o.oracle.empty())
    throw std::logic_error("answer: sharing a document prefix needs a pot without an oracle");
  go.resume = o.resume;
  go.resume_body = o.resume_body;
  if (o.after_chunk)
    go.after_chunk = [&](int body_done) {
      o.after_chunk(body_done, [&] {
        std::vector<TokenId> stream = parts.prefix;
        stream.insert(stream.end(), parts.body.begin(), parts.body.begin() + body_done);
        return engine.pot()->capture(stream, engine.model_id());
      });
    };
  if (!o.oracle.empty()) {
    const auto span = watch_span(engine.tokenizer(), parts.body, static_cast<int>(parts.prefix.size()), document, o.oracle);
    if (span.first < 0) throw SettingError("pot_oracle", "", "", "{pot_oracle} text does not occur in the document");
    engine.pot()->set_oracle(span.first, span.second);
  }
  const auto watched = o.watch.empty() ? std::pair<int, int>{-1, -1}
                                        : watch_span(engine.tokenizer(), parts.body,
                                                     static_cast<int>(parts.prefix.size()), document, o.watch);
  nlohmann::json attention;  // --pot-watch-attention: measured once the document is read
  if (o.watch_attention && !o.watch.empty())
    go.after_body = [&] {
      MemoryPot& pot = *engine.pot();
      attention = attention_report(pot, engine.config(), watched, pot.catalyst_attention());
    };
  Answer a;
  a.result = engine.generate(parts, plan, go);
  a.kv_capacity = plan.kv_capacity();
  a.pot = pot_report(*engine.pot(), static_cast<int>(plan.catalyst().size()));
  a.pot["ccd_cycles"] = engine.pot()->stats().cycles;
  if (!o.watch.empty()) {
    a.pot["watch"] = watch_report(*engine.pot(), engine.config(), watched);
    if (o.watch_attention) a.pot["watch"]["question_attention"] = attention;
  }
  if (o.pot_text) {
    std::vector<TokenId> stream = parts.all();
    stream.insert(stream.end(), a.result.tokens.begin(), a.result.tokens.end());
    a.pot["held"] = text_report(*engine.pot(), engine.config(), engine.tokenizer(), stream);
  }
  return a;
}

}  // namespace infinipot
