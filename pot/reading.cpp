#include "pot/reading.h"

#include <algorithm>
#include <stdexcept>

#include "model_loader/setting_names.h"

namespace infinipot {
namespace {

std::string str(long long v) { return std::to_string(v); }

// Every entry the prompt takes: the chat prefix, the document, the catalyst, and the final
// part (question, template tail) with its answer.
int whole_prompt(const PotLayout& L) { return L.pinned + L.body + L.catalyst + L.final_tokens; }

class ThroughPot : public Reading {
 public:
  const char* name() const override { return "through a pot"; }
  StorePlan size(const StoreRequest& r, const PotLayout& layout) const override {
    const PotOptions pot = MemoryPot::resolve(r.pot, layout);
    return {pot.capacity, pot};
  }
  bool reads_a_stream() const override { return true; }
  std::string smaller_store(const std::string&, const std::string& entries) const override {
    return "a smaller {pot} (" + entries + ")";
  }
};

// SnapKV: the whole prompt in memory; the pot's size N is what survives its one selection.
class WholeInput : public Reading {
 public:
  const char* name() const override { return "whole input, then one selection"; }
  StorePlan size(const StoreRequest& r, const PotLayout& layout) const override {
    PotOptions po = r.pot;
    if (po.keep != 0)
      throw SettingError("keep", str(po.keep), "0 (not given)", "{keep} does not apply to {policy} " + po.policy + ": {pot} N is what it keeps");
    const int n = po.capacity, pinned = MemoryPot::pinned_of(po, layout.pinned);
    if (n <= pinned)
      throw SettingError("pot", str(n), ">= " + str(pinned + 1), "{pot} " + str(n) + " with {policy} " + po.policy +
                                  " keeps no more than the chat prefix (" + str(pinned) + " tokens); use {pot} " +
                                  str(pinned + 1) + " or more");
    const int needed = whole_prompt(layout);
    if (r.at_least > 0 && r.at_least < needed)
      throw std::logic_error("StoreRequest::at_least " + str(r.at_least) + " is below this prompt's " + str(needed) +
                             " entries");
    po.capacity = std::max(needed, r.at_least);
    // An input that fits in N entries is never distilled (size <= keep).
    po.keep = std::min(n, needed - layout.catalyst - 1);
    po = MemoryPot::resolve(po, layout);
    return {po.capacity, po};
  }
  bool reads_a_stream() const override { return false; }
  void after_document(MemoryPot& pot) const override { pot.distill(); }  // the one selection
  std::string smaller_store(const std::string& policy, const std::string& entries) const override {
    return "a policy that reads through the pot ({policy} " + policy + " holds the whole input: " + entries + ")";
  }
};

class FullCache : public Reading {
 public:
  const char* name() const override { return "full cache"; }
  StorePlan size(const StoreRequest& r, const PotLayout& layout) const override {
    const int needed = whole_prompt(layout);
    const int capacity = r.ctx > 0 ? r.ctx : needed;
    if (needed > capacity)
      throw SettingError("ctx", str(capacity), ">= " + str(needed),
                         "the prompt (" + str(needed - layout.answer) + " tokens) plus {n_predict} " +
                                  str(layout.answer) + " needs " + str(needed) + " KV entries but {ctx} is " +
                                  str(capacity) + "; raise {ctx} or shorten the input");
    return {capacity, std::nullopt};
  }
  bool reads_a_stream() const override { return false; }
  std::string smaller_store(const std::string&, const std::string& entries) const override {
    return "a smaller KV capacity (" + entries + "), or {pot} N to read through a memory pot";
  }
};

}  // namespace

const Reading& reading_through_pot() {
  static const ThroughPot r;
  return r;
}
const Reading& reading_whole_input() {
  static const WholeInput r;
  return r;
}
const Reading& reading_full_cache() {
  static const FullCache r;
  return r;
}

}  // namespace infinipot
