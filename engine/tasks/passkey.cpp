// passkey: the usual pass-key task (Mohtashami & Jaggi 2023; engine/nih.h): a five-digit key
// at a depth, "What is the pass key?", scored by the answer's first integer. Its keys and
// documents are those of the records written before there were other tasks.
#include "engine/tasks/task_registry.h"

namespace infinipot::nih {
namespace {

class PasskeyTask : public Task {
 public:
  const char* name() const override { return "passkey"; }
  const char* summary() const override { return "a five-digit pass key at a depth; the answer's first number"; }
  const char* headline() const override { return "pass key found"; }
  ValueKind kind() const override { return ValueKind::Number; }
  Rule rule() const override { return Rule::First; }
  int default_n_predict() const override { return 16; }
  std::string fixed_question() const override { return kQuestion; }
  bool takes_needle() const override { return true; }
  Trial make(const TrialSpec& t, DocumentBuilder& docs) const override {
    // derive_key, not TrialRng: the keys of the existing results files (a reworded needle
    // hides the same key).
    const std::string key = derive_key(t.seed, t.haystack, t.length, t.depth, t.trial);
    return {docs.build(t.length, t.depth, key, t.needle.empty() ? kNeedle : t.needle), kQuestion, {key}, key};
  }
};

}  // namespace

std::unique_ptr<Task> make_passkey_task() { return std::make_unique<PasskeyTask>(); }

}  // namespace infinipot::nih
