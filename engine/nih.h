// The pass-key needle-in-a-haystack benchmark (`infinipot nih`): its host-side logic, no
// OpenCL. Documents of a given length in tokens with a five-digit pass key hidden at a
// depth, the keys themselves, scoring of the answers, the policy list, the JSONL results
// file (resume after a crash) and the summary tables. bench/cmd_nih.cpp runs the trials.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>
#include <nlohmann/json.hpp>

#include "pot/policy_spec.h"
#include "pot/positions.h"
#include "pot/word_runs.h"

namespace infinipot::nih {

// The usual pass-key task (Mohtashami & Jaggi 2023, as in the InfiniPot paper's NIH runs).
extern const char* const kTaskLine;  // "There is an important info hidden inside a lot of irrelevant text. ..."
extern const char* const kFiller;    // "The grass is green. The sky is blue. ..." (repeated)
extern const char* const kQuestion;  // "What is the pass key? Answer with the number only." (after the document)
// The pass-key needle: kNeedle with every "{key}" replaced by the key
// ("The pass key is KEY. Remember it. KEY is the pass key.").
extern const char* const kNeedle;  // "The pass key is {key}. Remember it. {key} is the pass key."
std::string needle(const std::string& key);
// Another wording of it (nih --needle): `sentence` with every "{key}" replaced by the key.
std::string needle(const std::string& sentence, const std::string& key);
// Throws std::invalid_argument naming --needle unless `sentence` holds "{key}" and some text.
void check_needle(const std::string& sentence);

// The text a document is cut from. A haystack has a fixed opening (the passkey task line;
// empty for prose) and a body text that is cycled as long as the length asks.
struct Haystack {
  std::string name;
  std::string opening;  // kept whole at the start ("" for prose)
  std::string text;     // the filler: cycled, cut at a word or sentence end
  std::string joiner;   // between two copies of text
};
Haystack passkey_haystack();
// Prose from a file's contents: whitespace runs become one space, runs with a blank line a
// paragraph break ("\n\n"). Throws std::invalid_argument naming `name` if no text is left.
Haystack prose_haystack(const std::string& name, const std::string& raw);

// Tokens in a text, as the engine's tokenizer counts them (no BOS, no special parsing).
using CountTokens = std::function<int(const std::string&)>;

struct Document {
  std::string text;
  std::string key;       // the pass key (build with a key only)
  int target = 0;        // tokens asked for
  int tokens = 0;        // tokens it has (within 1% of target unless the target is tiny)
  size_t needle_at = 0;  // byte offset of the needle in text
  double needle_depth = 0;  // needle_at as a share of the text after the opening
  std::vector<size_t> inserts_at;  // byte offset of each needle, in the order they were given
};

// A sentence to hide in a haystack at a depth (0: right after the opening, 1: at the end).
struct Insert {
  double depth = 0;
  std::string text;
};

// Builds documents for one haystack. The filler cut for a length (without the needle) is
// found once per length: a cut by a chars-per-token estimate, measured, corrected (at most
// a few tokenizations of that length), then cached; each document is measured once more.
class DocumentBuilder {
 public:
  DocumentBuilder(Haystack haystack, CountTokens count);
  // The haystack cut to about target_tokens with the needle for `key` (`sentence` with every
  // "{key}" replaced) inserted at the sentence boundary nearest `depth` (0: right after the
  // opening, 1: at the end).
  Document build(int target_tokens, double depth, const std::string& key, const std::string& sentence = kNeedle);
  // The same with any needles, each at the sentence boundary nearest its depth; needles that
  // meet at one boundary keep the order given. needle_at/needle_depth are the first one's.
  Document build(int target_tokens, const std::vector<Insert>& inserts);
  // Tokens in a text by the builder's counter (tallied in tokenizations()).
  int tokens(const std::string& text);
  const Haystack& haystack() const { return h_; }
  // Characters the whole document will span for a target (for messages before building).
  double chars_per_token();
  // Texts tokenized so far and their total bytes (tests check the builder stays frugal).
  int tokenizations() const { return n_counts_; }
  size_t bytes_tokenized() const { return bytes_counted_; }

 private:
  struct Cut {
    size_t chars = 0;  // bytes of the opening + filler
    int tokens = 0;
  };
  int count(const std::string& s);
  const std::string& stream(size_t min_chars);
  size_t snap(size_t want, size_t window);
  Cut cut_for(int body_tokens, int tolerance);
  Haystack h_;
  CountTokens count_;
  std::string stream_;  // opening + text + joiner + text ... (grown on demand)
  double cpt_ = 0;      // chars per token, from a sample
  std::map<int, Cut> cuts_;  // body tokens -> cut
  int n_counts_ = 0;
  size_t bytes_counted_ = 0;
};

// The trial's pass key: five digits (10000..99999), a pure function of its arguments, so
// every policy reads the same documents and another seed gives other keys.
std::string derive_key(uint64_t seed, const std::string& haystack, int length, double depth, int trial);

// The first maximal run of ASCII digits in text, if any ("is 12,345" -> "12").
std::optional<std::string> first_integer(const std::string& text);
// Whether the answer's first integer is the key (leading zeros ignored).
bool key_found(const std::string& answer, const std::string& key);

// One entry of --policy: pot/policy_spec.h's text, "name" or "name:pot=2048:keep=512:...".
using PolicySpec = infinipot::PolicySpec;
// Parses the comma list; default_pot/default_keep are --pot/--keep. Throws
// std::invalid_argument naming --policy and the bad entry.
std::vector<PolicySpec> parse_policies(const std::string& list, int default_pot, int default_keep);
// Gives each spec whose rule is `auto` the model's rule (pot/positions.h default_position_rule),
// so configs and records name it; a spec that then repeats an earlier config is dropped.
void resolve_positions(std::vector<PolicySpec>& specs, const std::string& architecture);
// "4096,8192" or "4K,128k" (K = 1024) -> token counts > 0. Throws naming `flag`.
std::vector<int> parse_lengths(const std::string& list, const std::string& flag);
// "0.1,0.5,0.9" -> fractions in [0, 1]. Throws naming `flag`.
std::vector<double> parse_depths(const std::string& list, const std::string& flag);
// "passkey,prose,alice": names, no duplicates, no empty ones. Throws naming `flag`.
std::vector<std::string> parse_names(const std::string& list, const std::string& flag);

// What identifies a trial in the results: (task, config, haystack, length, depth, trial, seed).
// `variant` is trial_variant's: "" for the task as it is.
std::string trial_id(const std::string& config, const std::string& haystack, int length, double depth, int trial,
                     uint64_t seed, const std::string& task = "passkey", const std::string& variant = "");
std::string trial_id(const nlohmann::json& record);  // "" if the record lacks a field
// A record's task: its "task" field; records written before there were tasks are passkey's.
std::string record_task(const nlohmann::json& record);
// What sets a trial apart from its task's usual form: another needle sentence (--needle) and
// another question (--question; for tasks with a fixed question only), as text for the
// tables ('needle "..."; question "..."'), "" when both are the task's own. Part of a trial's
// identity, so a results file never resumes or tabulates one wording's trials as another's.
std::string trial_variant(const std::string& task, const std::string& needle, const std::string& question);
// The same from a record's "task", "needle" and "question" fields.
std::string record_variant(const nlohmann::json& record);

// The results file (JSON Lines, one record per trial).
struct Results {
  std::vector<nlohmann::json> records;  // in file order
  std::map<std::string, size_t> done;   // trial_id -> index of its latest answered record
  std::vector<std::string> warnings;    // e.g. a truncated last line that was dropped
};
// Reads path (missing: empty results). A last line that is not JSON (a crash mid-write) is
// dropped from the file with a warning, so appending goes on cleanly; a bad line before the
// last one is an error (std::invalid_argument naming the line). Records with "error" are
// kept for the tables but do not count as done: a resumed run tries them again.
Results load_results(const std::string& path, bool repair = true);
// Appends one record as a line and flushes it to the OS.
void append_result(const std::string& path, const nlohmann::json& record);

// The latest record of each trial (an answer after an earlier error replaces it).
std::vector<nlohmann::json> latest_records(const std::vector<nlohmann::json>& records);
// Markdown: per task and haystack, a table of configs (rows) by lengths (columns), cells
// "found/total (pct%)" (all-of tasks add ", score S", the mean share of the references
// found), then one of config and length (rows) by depths (columns). Trials that ended in an
// error are not in total; a cell that has some says "+E err".
std::string render_tables(const std::vector<nlohmann::json>& records);
// The same figures as JSON: {"tasks": {task: {"haystacks": {name: {"by_config": [...],
// "by_length": [...], "by_depth": [...]}}}}, "haystacks": the passkey task's, as before}.
nlohmann::json summary_json(const std::vector<nlohmann::json>& records);

}  // namespace infinipot::nih
