// The long-context tasks of `infinipot nih --task NAME`: what a trial hides in its document,
// what it asks and how an answer is scored. One file per task in engine/tasks/, one line each
// in task_registry.cpp; bench/cmd_nih.cpp runs any of them the same way. No OpenCL.
//
// Every value a trial hides (keys, numbers, uuids, variable names, word lists) is a pure
// function of (task, seed, haystack, length, depth, trial), so every policy reads the same
// documents and another --seed gives other ones.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/nih.h"

namespace infinipot::nih {

// What identifies a trial's document.
struct TrialSpec {
  uint64_t seed = 1;
  std::string haystack;
  int length = 0;  // tokens
  double depth = 0;
  int trial = 0;
  std::string needle;  // another needle sentence with {key} (nih --needle; tasks that take_needle()); "" for the task's
};

// One trial: the document, the question asked after it and what a right answer contains.
struct Trial {
  Document doc;  // doc.needle_depth is NaN for a task with no needle (cwe)
  std::string question;
  std::vector<std::string> references;
  std::string watch;  // text the pot is watched for (--pot-watch, oracle=1); "" for none
};

// What the references are and how they are found in an answer:
//   Number  maximal runs of ASCII digits, leading zeros ignored ("0042" is 42; "12,345" is 12 and 345);
//   Uuid    8-4-4-4-12 hex groups not touching another letter or digit, case ignored;
//   Word    maximal runs of ASCII letters and digits, case ignored.
enum class ValueKind { Number, Uuid, Word };
// First: found when the answer's first value of the kind is the one reference (an answer
//        that lists several candidates gets no credit; the pass key's rule).
// All:   the score is the share of the references among the answer's values (in any order,
//        RULER's all-of rule); found when all are there.
enum class Rule { First, All };

struct Score {
  int present = 0;  // references found
  int total = 0;    // references asked for
  double fraction = 0;
  bool found = false;
};

// The values of a kind in an answer, normalised (digits without leading zeros, lower case).
std::vector<std::string> answer_values(const std::string& answer, ValueKind kind);
Score score_answer(const std::string& answer, const std::vector<std::string>& references, ValueKind kind, Rule rule);

class Task {
 public:
  virtual ~Task() = default;
  virtual const char* name() const = 0;
  virtual const char* summary() const = 0;  // one line for --help and the docs
  virtual const char* headline() const = 0;  // what "found" means in the tables: "pass key found"
  virtual ValueKind kind() const = 0;
  virtual Rule rule() const = 0;
  virtual int default_n_predict() const = 0;  // enough tokens for every reference and separators
  // The question when it is the same for every trial ("" when it names the trial's keys):
  // only such a question may be replaced with --question.
  virtual std::string fixed_question() const { return ""; }
  // Whether TrialSpec::needle may reword the task's needle (nih --needle).
  virtual bool takes_needle() const { return false; }
  // The trial's document (cut from `docs`' haystack unless the task makes its own text),
  // question and references.
  virtual Trial make(const TrialSpec& t, DocumentBuilder& docs) const = 0;

  Score score(const std::string& answer, const std::vector<std::string>& references) const {
    return score_answer(answer, references, kind(), rule());
  }
};

// A deterministic stream of random numbers for one trial of one task.
class TrialRng {
 public:
  TrialRng(const std::string& task, const TrialSpec& t);
  uint64_t next();
  uint64_t below(uint64_t n);  // uniform in [0, n)
  // A k-digit number without a leading zero.
  std::string digits(int k);
  std::vector<std::string> numbers(size_t n, int k);  // n distinct k-digit numbers
  std::string uuid();  // version 4 form, lower case
  // n distinct words of the built-in list, none in `avoid`.
  std::vector<std::string> words(size_t n, const std::vector<std::string>& avoid = {});

 private:
  uint64_t state_;
};

// Common English nouns (distinct, lower case): keys of the niah tasks, the words of cwe.
const std::vector<std::string>& word_list();

// "One of the special magic numbers for KEY is: VALUE." (uuids: "magic uuids").
std::string magic_needle(const std::string& key, const std::string& value, ValueKind kind);
// depth, then n - 1 more spread evenly around the document from it (wrapping past the end).
std::vector<double> spread_depths(double depth, size_t n);
// "a, b, c and d".
std::string and_list(const std::vector<std::string>& items);

}  // namespace infinipot::nih
