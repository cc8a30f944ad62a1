// niah_single and niah_uuid: one needle "One of the special magic numbers for KEY is: VALUE."
// (a 7-digit number, or a uuid) at a depth; asked for KEY's value. The key is a word of the
// built-in list, so the question cannot be answered from the question alone.
#include "engine/tasks/task_registry.h"

namespace infinipot::nih {
namespace {

class NiahSingleTask : public Task {
 public:
  explicit NiahSingleTask(ValueKind kind) : kind_(kind) {}
  const char* name() const override { return kind_ == ValueKind::Uuid ? "niah_uuid" : "niah_single"; }
  const char* summary() const override {
    return kind_ == ValueKind::Uuid ? "one word -> uuid needle at a depth; the answer's first uuid"
                                    : "one word -> 7-digit number needle at a depth; the answer's first number";
  }
  const char* headline() const override { return kind_ == ValueKind::Uuid ? "uuid found" : "number found"; }
  ValueKind kind() const override { return kind_; }
  Rule rule() const override { return Rule::First; }
  // SmolLM2 often repeats the question's words before the value ("The special magic number for
  // stump is 4171036.": 15 tokens, a digit a token); a uuid is 36 characters more
  // (up to a token each).
  int default_n_predict() const override { return kind_ == ValueKind::Uuid ? 64 : 24; }
  Trial make(const TrialSpec& t, DocumentBuilder& docs) const override {
    TrialRng rng(name(), t);
    const std::string key = rng.words(1)[0];
    const std::string value = kind_ == ValueKind::Uuid ? rng.uuid() : rng.digits(7);
    const std::string what = kind_ == ValueKind::Uuid ? "uuid" : "number";
    Trial tr;
    tr.doc = docs.build(t.length, {{t.depth, magic_needle(key, value, kind_)}});
    tr.question = "What is the special magic " + what + " for " + key + "? Answer with the " + what + " only.";
    tr.references = {value};
    tr.watch = value;
    return tr;
  }

 private:
  ValueKind kind_;
};

}  // namespace

std::unique_ptr<Task> make_niah_single_task() { return std::make_unique<NiahSingleTask>(ValueKind::Number); }
std::unique_ptr<Task> make_niah_uuid_task() { return std::make_unique<NiahSingleTask>(ValueKind::Uuid); }

}  // namespace infinipot::nih
