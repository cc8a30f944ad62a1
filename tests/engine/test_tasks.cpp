// The nih tasks (engine/tasks/): what each one hides and asks, measured with the tiny
// model's real BPE tokenizer (no OpenCL): documents of the asked length in tokens, needles at
// their depths, values deterministic per seed, each task's own structure checked from its
// text by an independent reading (multikey's distractors, vt's chains, cwe's counts), the
// scoring rules, the results file's task identity and tables, and `infinipot nih --task`
// end to end on a tiny random-weight model.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "engine/answer.h"
#include "engine/nih.h"
#include "engine/tasks/task_registry.h"
#include "tests/support/cli_process.h"
#include "tests/support/gguf_test_util.h"
#include "tests/support/nih_text.h"
#include "tests/support/tiny_tokenizer.h"

namespace infinipot::nih {
namespace {

using test::genesis;
using test::occurrences;
using test::read_all;

const std::vector<std::string> kRuler = {"niah_single",     "niah_uuid", "niah_multikey", "niah_multivalue",
                                         "niah_multiquery", "vt",        "cwe"};

Trial make(const std::string& task, DocumentBuilder& b, int length, double depth, int trial = 0, uint64_t seed = 1) {
  return find_task(task).make({seed, b.haystack().name, length, depth, trial}, b);
}

// The (key, value) of every "One of the special magic ... for KEY is: VALUE." in a text, in order.
std::vector<std::pair<std::string, std::string>> magic_needles(const std::string& text) {
  static const std::regex re("One of the special magic (numbers|uuids) for ([a-z]+) is: ([0-9a-f-]+)\\.");
  std::vector<std::pair<std::string, std::string>> out;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), re); it != std::sregex_iterator(); ++it)
    out.push_back({(*it)[2].str(), (*it)[3].str()});
  return out;
}

// ---------------------------------------------------------------------------------------
// The registry

TEST(Tasks, RegistryNamesEveryTaskOnceWithSensibleAnswerLengths) {
  std::set<std::string> names;
  for (const auto& t : tasks()) {
    EXPECT_TRUE(names.insert(t->name()).second) << t->name();
    EXPECT_EQ(&find_task(t->name()), t.get());
    EXPECT_GE(t->default_n_predict(), 16) << t->name();
    EXPECT_LE(t->default_n_predict(), 64) << t->name();
    EXPECT_NE(std::string(t->summary()), "");
  }
  EXPECT_EQ(std::string(tasks()[0]->name()), kDefaultTask);
  for (const auto& n : kRuler) EXPECT_TRUE(names.count(n)) << n;
  // Answers that list several values need more tokens than one 7-digit number.
  for (const char* many : {"niah_multivalue", "niah_multiquery", "vt", "cwe", "niah_uuid"})
    EXPECT_GT(find_task(many).default_n_predict(), find_task("niah_single").default_n_predict()) << many;
  EXPECT_EQ(find_task("passkey").default_n_predict(), 16) << "the pass key's -n as before";
  try {
    find_task("niah");
    FAIL() << "an unknown task was accepted";
  } catch (const std::invalid_argument& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("--task"), std::string::npos) << m;
    EXPECT_NE(m.find("'niah'"), std::string::npos) << m;
    for (const auto& n : kRuler) EXPECT_NE(m.find(n), std::string::npos) << m;
  }
  EXPECT_EQ(task_or_null("nosuch"), nullptr);
  // Only the pass key's question is the same for every trial (so only it takes --question).
  for (const auto& t : tasks()) EXPECT_EQ(t->fixed_question().empty(), t->name() != std::string("passkey"));
}

TEST(Tasks, WordListIsDistinctLowerCaseWords) {
  const auto& w = word_list();
  EXPECT_GE(w.size(), 300u);
  EXPECT_EQ(std::set<std::string>(w.begin(), w.end()).size(), w.size());
  for (const auto& x : w) EXPECT_TRUE(std::regex_match(x, std::regex("[a-z]{3,12}"))) << x;
}

// ---------------------------------------------------------------------------------------
// Documents: length, needles, depth

TEST(Tasks, EveryTaskHitsTheLengthWithinOnePercent) {
  for (const Haystack& h : {passkey_haystack(), genesis()}) {
    DocumentBuilder b(h, test::tiny_token_counter());
    for (const auto& name : kRuler)
      for (int length : {1500, 6000})
        for (double depth : {0.0, 0.5, 1.0}) {
          SCOPED_TRACE(name + " " + h.name + " " + std::to_string(length) + " d=" + std::to_string(depth));
          const Trial t = make(name, b, length, depth);
          EXPECT_LE(std::abs(t.doc.tokens - length), std::max(1, length / 100)) << "got " << t.doc.tokens;
          EXPECT_EQ(t.doc.tokens, test::tiny_token_counter()(t.doc.text)) << "the count reported is the tokenizer's";
          EXPECT_EQ(t.doc.target, length);
          EXPECT_FALSE(t.references.empty());
          EXPECT_FALSE(t.question.empty());
          // Every reference is in the document and none is given away by the question.
          for (const auto& r : t.references) {
            EXPECT_NE(t.doc.text.find(r), std::string::npos) << r;
            EXPECT_EQ(t.question.find(r), std::string::npos) << "the question gives away " << r;
          }
        }
  }
}

TEST(Tasks, FirstNeedleSitsAtTheRequestedDepth) {
  for (const Haystack& h : {passkey_haystack(), genesis()}) {
    DocumentBuilder b(h, test::tiny_token_counter());
    for (const auto& name : kRuler) {
      if (name == "cwe") continue;  // no needle: checked below
      for (double depth : {0.0, 0.25, 0.5, 0.75, 1.0}) {
        SCOPED_TRACE(name + " " + h.name + " d=" + std::to_string(depth));
        const Trial t = make(name, b, 4000, depth, 3);
        ASSERT_FALSE(t.doc.inserts_at.empty());
        EXPECT_EQ(t.doc.needle_at, t.doc.inserts_at[0]);
        // The first needle holds the first reference (vt: the statement giving the value).
        const std::string first = t.doc.text.substr(t.doc.needle_at, 60);
        EXPECT_NE(first.find(name == "vt" ? t.references[0] : t.references[0].substr(0, 7)), std::string::npos)
            << first;
        // Sentence granularity: Genesis's sentences run to ~1,000 bytes, the filler's to 20.
        const double slack = (h.name == "prose" ? 1000.0 : 40.0) / double(t.doc.text.size());
        EXPECT_NEAR(t.doc.needle_depth, depth, slack + 0.01);
        EXPECT_NEAR(double(t.doc.needle_at) / double(t.doc.text.size()), depth, slack + 0.08)
            << "the needle's place in the whole text";
      }
    }
  }
}

TEST(Tasks, SpreadNeedlesGoAroundTheDocumentFromTheDepth) {
  EXPECT_EQ(spread_depths(0.5, 4), (std::vector<double>{0.5, 0.75, 1.0, 0.25}));
  EXPECT_EQ(spread_depths(0.1, 1), (std::vector<double>{0.1}));
  DocumentBuilder b(passkey_haystack(), test::tiny_token_counter());
  const Trial t = make("niah_multiquery", b, 4000, 0.5);
  ASSERT_EQ(t.doc.inserts_at.size(), 4u);
  const double n = double(t.doc.text.size());
  EXPECT_NEAR(t.doc.inserts_at[0] / n, 0.5, 0.05);
  EXPECT_NEAR(t.doc.inserts_at[1] / n, 0.75, 0.05);
  EXPECT_GT(t.doc.inserts_at[2] / n, 0.9);
  EXPECT_NEAR(t.doc.inserts_at[3] / n, 0.25, 0.1);
}

// ---------------------------------------------------------------------------------------
// Values: deterministic, seed- and trial-dependent

TEST(Tasks, ValuesAreAPureFunctionOfTheTrialAndDifferAcrossSeedsAndTrials) {
  DocumentBuilder b(passkey_haystack(), test::tiny_token_counter());
  for (const auto& name : kRuler) {
    SCOPED_TRACE(name);
    const Trial a = make(name, b, 1200, 0.5, 0, 7), again = make(name, b, 1200, 0.5, 0, 7);
    EXPECT_EQ(a.doc.text, again.doc.text);
    EXPECT_EQ(a.question, again.question);
    EXPECT_EQ(a.references, again.references);
    // A fresh builder (no cached cuts) gives the same trial too.
    DocumentBuilder fresh(passkey_haystack(), test::tiny_token_counter());
    EXPECT_EQ(make(name, fresh, 1200, 0.5, 0, 7).doc.text, a.doc.text);
    int seed_differs = 0, trial_differs = 0;
    std::set<std::vector<std::string>> seen;
    for (int k = 0; k < 8; ++k) {
      const Trial s = make(name, b, 1200, 0.5, k, 1);
      seen.insert(s.references);
      seed_differs += s.references != make(name, b, 1200, 0.5, k, 2).references;
      trial_differs += s.references != make(name, b, 1200, 0.5, k + 1, 1).references;
    }
    EXPECT_GE(seed_differs, 7);
    EXPECT_GE(trial_differs, 7);
    EXPECT_GE(seen.size(), 7u);
    // Length and depth are part of the identity too.
    EXPECT_NE(make(name, b, 1300, 0.5, 0, 7).references, a.references);
    EXPECT_NE(make(name, b, 1200, 0.4, 0, 7).references, a.references);
  }
}

TEST(Tasks, PasskeyTaskIsTheOldBenchmark) {
  DocumentBuilder b(genesis(), test::tiny_token_counter()), old(genesis(), test::tiny_token_counter());
  const Task& p = find_task("passkey");
  for (double depth : {0.1, 0.9}) {
    const Trial t = p.make({1, "prose", 3000, depth, 2}, b);
    const std::string key = derive_key(1, "prose", 3000, depth, 2);
    EXPECT_EQ(t.references, std::vector<std::string>{key});
    EXPECT_EQ(t.doc.text, old.build(3000, depth, key).text);
    EXPECT_EQ(t.question, kQuestion);
    EXPECT_EQ(t.watch, key);
  }
  for (const char* a : {"12345", "The pass key is 12345.", "012345", "1234 5", "123456", "none", "",
                        "Chapter 3: 12345"})
    EXPECT_EQ(p.score(a, {"12345"}).found, key_found(a, "12345")) << a;
}

// --needle: the same key and depth in other words; only the pass key's needle is reworded.
TEST(Tasks, PasskeyNeedleInOtherWordsHidesTheSameKeyAtTheDepth) {
  DocumentBuilder b(genesis(), test::tiny_token_counter());
  const Task& p = find_task("passkey");
  EXPECT_TRUE(p.takes_needle());
  for (const auto& t : tasks())
    if (std::string(t->name()) != "passkey") EXPECT_FALSE(t->takes_needle()) << t->name();
  const std::string sentence = "Dr. Okafor locked the archive with code {key}; the code {key} opens it.";
  for (double depth : {0.1, 0.5, 0.9}) {
    SCOPED_TRACE(depth);
    const Trial usual = p.make({1, "prose", 3000, depth, 1}, b);
    const Trial other = p.make({1, "prose", 3000, depth, 1, sentence}, b);
    const std::string key = derive_key(1, "prose", 3000, depth, 1);
    EXPECT_EQ(other.references, std::vector<std::string>{key}) << "the same key in other words";
    EXPECT_EQ(other.doc.key, key);
    const std::string said = "Dr. Okafor locked the archive with code " + key + "; the code " + key + " opens it.";
    EXPECT_EQ(occurrences(other.doc.text, said), 1u);
    EXPECT_EQ(other.doc.text.find(said), other.doc.needle_at);
    EXPECT_EQ(occurrences(other.doc.text, "pass key is"), 0u);
    EXPECT_NEAR(other.doc.needle_depth, usual.doc.needle_depth, 0.02);
    EXPECT_LE(std::abs(other.doc.tokens - 3000), 30);
    EXPECT_EQ(other.question, kQuestion);
    EXPECT_EQ(p.make({1, "prose", 3000, depth, 1, kNeedle}, b).doc.text, usual.doc.text) << "kNeedle is the usual one";
  }
}

// ---------------------------------------------------------------------------------------
// Each task's structure, read back from its text

TEST(Tasks, SingleNeedleTasks) {
  DocumentBuilder b(genesis(), test::tiny_token_counter());
  for (int trial = 0; trial < 5; ++trial) {
    const Trial n = make("niah_single", b, 2000, 0.3, trial);
    const auto needles = magic_needles(n.doc.text);
    ASSERT_EQ(needles.size(), 1u);
    EXPECT_TRUE(std::regex_match(n.references[0], std::regex("[1-9][0-9]{6}"))) << n.references[0];
    EXPECT_EQ(needles[0].second, n.references[0]);
    EXPECT_NE(n.question.find("for " + needles[0].first + "?"), std::string::npos) << n.question;
    EXPECT_NE(n.question.find("number only"), std::string::npos);

    const Trial u = make("niah_uuid", b, 2000, 0.3, trial);
    const auto un = magic_needles(u.doc.text);
    ASSERT_EQ(un.size(), 1u);
    EXPECT_TRUE(std::regex_match(u.references[0],
                                 std::regex("[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")))
        << u.references[0];
    EXPECT_EQ(un[0].second, u.references[0]);
    EXPECT_NE(u.doc.text.find("magic uuids for " + un[0].first), std::string::npos);
    EXPECT_NE(u.question.find("uuid for " + un[0].first + "?"), std::string::npos) << u.question;
  }
}

TEST(Tasks, MultikeyDistractorsNeverShareTheKey) {
  DocumentBuilder b(passkey_haystack(), test::tiny_token_counter());
  for (int trial = 0; trial < 30; ++trial) {
    const Trial t = make("niah_multikey", b, 2000, trial % 2 ? 0.2 : 0.8, trial);
    const auto needles = magic_needles(t.doc.text);
    ASSERT_EQ(needles.size(), 4u);
    std::smatch m;
    ASSERT_TRUE(std::regex_search(t.question, m, std::regex("number for ([a-z]+)\\?")));
    const std::string key = m[1];
    int real = 0;
    std::set<std::string> keys, values;
    for (const auto& [k, v] : needles) {
      keys.insert(k);
      values.insert(v);
      if (k == key) {
        ++real;
        EXPECT_EQ(v, t.references[0]);
      } else {
        EXPECT_NE(v, t.references[0]) << "a distractor holds the answer";
      }
    }
    EXPECT_EQ(real, 1) << "exactly one needle for the asked key";
    EXPECT_EQ(keys.size(), 4u);
    EXPECT_EQ(values.size(), 4u);
    // The real needle is the one at the depth.
    EXPECT_EQ(t.doc.text.compare(t.doc.needle_at, 40, magic_needle(key, t.references[0], ValueKind::Number), 0, 40), 0);
  }
}

TEST(Tasks, MultivalueAndMultiqueryAskForEveryValue) {
  DocumentBuilder b(genesis(), test::tiny_token_counter());
  for (int trial = 0; trial < 5; ++trial) {
    const Trial mv = make("niah_multivalue", b, 3000, 0.6, trial);
    const auto nv = magic_needles(mv.doc.text);
    ASSERT_EQ(nv.size(), 4u);
    std::set<std::string> values;
    for (const auto& [k, v] : nv) {
      EXPECT_EQ(k, nv[0].first) << "one key for every value";
      values.insert(v);
    }
    EXPECT_EQ(values, std::set<std::string>(mv.references.begin(), mv.references.end()));
    EXPECT_EQ(values.size(), 4u);
    EXPECT_NE(mv.question.find("for " + nv[0].first + "?"), std::string::npos) << mv.question;

    const Trial mq = make("niah_multiquery", b, 3000, 0.6, trial);
    const auto nq = magic_needles(mq.doc.text);
    ASSERT_EQ(nq.size(), 4u);
    std::map<std::string, std::string> by_key(nq.begin(), nq.end());
    ASSERT_EQ(by_key.size(), 4u) << "four different keys";
    // The question names the keys in the order of the references.
    size_t last = 0;
    for (const auto& r : mq.references) {
      const auto it = std::find_if(nq.begin(), nq.end(), [&](const auto& kv) { return kv.second == r; });
      ASSERT_NE(it, nq.end()) << r;
      const size_t at = mq.question.find(it->first);
      ASSERT_NE(at, std::string::npos) << it->first << " not asked: " << mq.question;
      EXPECT_GT(at, last);
      last = at;
    }
  }
}

// Resolves every "VAR X = Y." of a text as a reader would.
std::map<std::string, std::string> resolve_vars(const std::string& text, std::vector<std::string>* order = nullptr) {
  static const std::regex re("VAR ([A-Z]{5}) = ([A-Z]{5}|[0-9]+)\\.");
  std::map<std::string, std::string> value;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), re); it != std::sregex_iterator(); ++it) {
    const std::string x = (*it)[1], y = (*it)[2];
    if (order) order->push_back(x);
    value[x] = std::isdigit(static_cast<unsigned char>(y[0])) ? y : value.at(y);  // assigned before it is read
  }
  return value;
}

TEST(Tasks, VariableTrackingChainsResolveToTheAskedValue) {
  for (const Haystack& h : {passkey_haystack(), genesis()}) {
    DocumentBuilder b(h, test::tiny_token_counter());
    for (double depth : {0.0, 0.5, 0.9, 1.0}) {
      SCOPED_TRACE(h.name + " d=" + std::to_string(depth));
      const Trial t = make("vt", b, 3000, depth, 1);
      std::vector<std::string> order;
      const auto value = resolve_vars(t.doc.text, &order);
      ASSERT_EQ(value.size(), 10u) << "two chains of five";
      std::smatch m;
      ASSERT_TRUE(std::regex_search(t.question, m, std::regex("the value ([0-9]+),")));
      std::set<std::string> holders, others;
      for (const auto& [x, v] : value) (v == m[1] ? holders : others).insert(x);
      EXPECT_EQ(holders, std::set<std::string>(t.references.begin(), t.references.end()));
      EXPECT_EQ(holders.size(), 5u);
      EXPECT_EQ(others.size(), 5u) << "the distractor chain has another value";
      // The asked chain is in order in the text, its head at the depth.
      std::vector<std::string> chain;
      for (const auto& x : order)
        if (holders.count(x)) chain.push_back(x);
      EXPECT_EQ(chain, t.references);
      const std::string head = "VAR " + t.references[0] + " = ";
      EXPECT_EQ(t.doc.text.compare(t.doc.needle_at, head.size(), head), 0) << t.doc.text.substr(t.doc.needle_at, 40);
    }
  }
}

TEST(Tasks, CommonWordsAreTheFiveMostFrequentWithAGap) {
  DocumentBuilder b(passkey_haystack(), test::tiny_token_counter());
  for (int length : {600, 4000, 20000}) {
    SCOPED_TRACE(length);
    const Trial t = make("cwe", b, length, 0.5, 2);
    EXPECT_TRUE(std::isnan(t.doc.needle_depth)) << "cwe hides no needle";
    EXPECT_TRUE(t.watch.empty());
    const size_t colon = t.doc.text.find("\n\n");
    ASSERT_NE(colon, std::string::npos);
    std::map<std::string, int> counts;
    std::string list = t.doc.text.substr(colon + 2);
    ASSERT_EQ(list.back(), '.');
    list.pop_back();
    std::stringstream ss(list);
    for (std::string w; std::getline(ss, w, ',');) ++counts[w.substr(w[0] == ' ')];
    std::vector<std::pair<int, std::string>> ranked;
    for (const auto& [w, n] : counts) {
      EXPECT_TRUE(std::count(word_list().begin(), word_list().end(), w)) << "'" << w << "'";
      ranked.push_back({n, w});
    }
    std::sort(ranked.rbegin(), ranked.rend());
    ASSERT_GE(ranked.size(), 10u);
    std::set<std::string> top;
    for (int i = 0; i < 5; ++i) top.insert(ranked[i].second);
    EXPECT_EQ(top, std::set<std::string>(t.references.begin(), t.references.end()));
    EXPECT_GE(ranked[4].first, ranked[5].first + 2) << "the common words stand out";
    EXPECT_GE(ranked[5].first, 1);
    EXPECT_NE(t.question.find("5 words"), std::string::npos);
  }
  // Haystack and depth do not shape the list, only its seed.
  DocumentBuilder p(genesis(), test::tiny_token_counter());
  EXPECT_NE(make("cwe", b, 2000, 0.5).references, make("cwe", p, 2000, 0.5).references);
}

// ---------------------------------------------------------------------------------------
// Scoring

TEST(TaskScoring, ValuesOfEachKind) {
  EXPECT_EQ(answer_values("The numbers are 0012345, 7 and 000.", ValueKind::Number),
            (std::vector<std::string>{"12345", "7", "0"}));
  EXPECT_EQ(answer_values("", ValueKind::Number), std::vector<std::string>{});
  EXPECT_EQ(answer_values("It's: {1B4E28BA-2FA1-41D2-883F-0016D3CCA427}.", ValueKind::Uuid),
            std::vector<std::string>{"1b4e28ba-2fa1-41d2-883f-0016d3cca427"});
  EXPECT_EQ(answer_values("x1b4e28ba-2fa1-41d2-883f-0016d3cca427", ValueKind::Uuid), std::vector<std::string>{})
      << "inside a longer run it is not a uuid";
  EXPECT_EQ(answer_values("1b4e28ba-2fa1-41d2-883f-0016d3cca4", ValueKind::Uuid), std::vector<std::string>{})
      << "a cut-off uuid";
  EXPECT_EQ(answer_values("QWERT, asdfg; Zxcvb.", ValueKind::Word), (std::vector<std::string>{"qwert", "asdfg", "zxcvb"}));
}

TEST(TaskScoring, FirstRuleTasks) {
  const Task& single = find_task("niah_single");
  EXPECT_EQ(single.rule(), Rule::First);
  const std::vector<std::string> ref = {"4821937"};
  EXPECT_TRUE(single.score("4821937", ref).found);
  EXPECT_TRUE(single.score("The special magic number for lantern is 4821937. Remember it!", ref).found) << "extra text";
  EXPECT_TRUE(single.score("04821937", ref).found) << "leading zeros";
  EXPECT_FALSE(single.score("48219370", ref).found) << "a longer number is another number";
  EXPECT_FALSE(single.score("4821", ref).found) << "a partial number";
  EXPECT_FALSE(single.score("4,821,937", ref).found) << "digit groups are other numbers";
  EXPECT_FALSE(single.score("", ref).found);
  EXPECT_EQ(single.score("", ref).fraction, 0.0);
  EXPECT_FALSE(single.score("1234567 or 4821937", ref).found) << "only the first number counts";
  EXPECT_EQ(single.score("4821937", ref).fraction, 1.0);
  EXPECT_EQ(find_task("niah_multikey").rule(), Rule::First);
  EXPECT_FALSE(find_task("niah_multikey").score("7777777, 4821937", ref).found) << "listing every number";

  const Task& uuid = find_task("niah_uuid");
  const std::vector<std::string> u = {"1b4e28ba-2fa1-41d2-883f-0016d3cca427"};
  EXPECT_TRUE(uuid.score("1b4e28ba-2fa1-41d2-883f-0016d3cca427", u).found);
  EXPECT_TRUE(uuid.score("The uuid is \"1B4E28BA-2FA1-41D2-883F-0016D3CCA427\".", u).found) << "case, quotes";
  EXPECT_TRUE(uuid.score("(1b4e28ba-2fa1-41d2-883f-0016d3cca427)", u).found) << "brackets";
  EXPECT_TRUE(uuid.score("uuid:1b4e28ba-2fa1-41d2-883f-0016d3cca427,", u).found) << "colon, comma";
  EXPECT_FALSE(uuid.score("1b4e28ba-2fa1-41d2-883f-0016d3cca428", u).found) << "one digit off";
  EXPECT_FALSE(uuid.score("1b4e28ba-2fa1-41d2-883f", u).found) << "a partial uuid";
  EXPECT_FALSE(uuid.score("1b4e28ba2fa141d2883f0016d3cca427", u).found) << "no dashes";
  EXPECT_FALSE(uuid.score("", u).found);
}

TEST(TaskScoring, AllRuleTasksRecordTheShareFound) {
  for (const char* name : {"niah_multivalue", "niah_multiquery", "vt", "cwe"})
    EXPECT_EQ(find_task(name).rule(), Rule::All) << name;
  const Task& mv = find_task("niah_multivalue");
  const std::vector<std::string> refs = {"1111111", "2222222", "3333333", "4444444"};
  Score s = mv.score("4444444, 2222222, 1111111, 3333333", refs);
  EXPECT_TRUE(s.found) << "any order";
  EXPECT_EQ(s.present, 4);
  EXPECT_EQ(s.fraction, 1.0);
  s = mv.score("The numbers are 1111111 and 3333333, I think.", refs);
  EXPECT_FALSE(s.found) << "a partial answer";
  EXPECT_EQ(s.present, 2);
  EXPECT_EQ(s.total, 4);
  EXPECT_DOUBLE_EQ(s.fraction, 0.5);
  EXPECT_EQ(mv.score("1111111 1111111 1111111 1111111", refs).present, 1) << "a repeat counts once";
  EXPECT_EQ(mv.score("01111111, 2222222", refs).present, 2) << "leading zeros";
  EXPECT_EQ(mv.score("", refs).fraction, 0.0);

  const Task& vt = find_task("vt");
  const std::vector<std::string> names = {"QWERT", "ASDFG", "ZXCVB", "POIUY", "LKJHG"};
  EXPECT_TRUE(vt.score("qwert, asdfg, zxcvb, poiuy, lkjhg", names).found) << "case";
  EXPECT_DOUBLE_EQ(vt.score("The variables are QWERT and ASDFG.", names).fraction, 0.4);
  EXPECT_EQ(vt.score("QWERTY, ASDFGH", names).present, 0) << "a longer word is another word";

  const Task& cwe = find_task("cwe");
  EXPECT_DOUBLE_EQ(cwe.score("1. Apple\n2. River\n3. stone", {"apple", "river", "stone", "cloud", "tiger"}).fraction,
                   0.6);
}

// ---------------------------------------------------------------------------------------
// Results: the task is part of a trial's identity; old records are passkey's

nlohmann::json record(const std::string& task, int trial, bool found, double score = -1) {
  nlohmann::json r = {{"config", "full"}, {"haystack", "passkey"}, {"length", 1024}, {"depth", 0.5},
                      {"trial", trial},   {"seed", 1},             {"found", found}};
  if (!task.empty()) r["task"] = task;
  if (score >= 0) r["score"] = score;
  return r;
}

TEST(TaskResults, ResumeSkipsFinishedTrialsOfEachTaskOnly) {
  test::TempDir dir;
  const std::string path = dir.file("r.jsonl");
  append_result(path, record("", 0, true));                // written before there were tasks
  append_result(path, record("niah_single", 1, false));
  nlohmann::json err = record("vt", 0, false);
  err["error"] = "budget";
  append_result(path, err);
  const Results r = load_results(path);
  auto done = [&](const std::string& task, int trial) {
    return r.done.count(trial_id("full", "passkey", 1024, 0.5, trial, 1, task)) > 0;
  };
  EXPECT_TRUE(done("passkey", 0)) << "a record without a task is a passkey record";
  EXPECT_TRUE(r.done.count(trial_id("full", "passkey", 1024, 0.5, 0, 1))) << "the default task";
  EXPECT_FALSE(done("niah_single", 0)) << "the pass key's trial 0 is not niah_single's";
  EXPECT_TRUE(done("niah_single", 1));
  EXPECT_FALSE(done("passkey", 1)) << "niah_single's trial 1 is not the pass key's";
  EXPECT_FALSE(done("niah_uuid", 1));
  EXPECT_FALSE(done("vt", 0)) << "errors are tried again";
  EXPECT_EQ(record_task(record("", 0, true)), "passkey");
  EXPECT_EQ(record_task(record("cwe", 0, true)), "cwe");
  EXPECT_EQ(latest_records(r.records).size(), 3u) << "same trial numbers of different tasks are different trials";
}

// Another wording (--needle, --question) is another trial: never resumed as, or tabulated
// with, the task's own; a question that names the trial's values is no variant.
TEST(TaskResults, NeedleAndQuestionWordingsAreTrialsOfTheirOwn) {
  EXPECT_EQ(trial_variant("passkey", "", ""), "");
  EXPECT_EQ(trial_variant("passkey", kNeedle, kQuestion), "") << "the usual wording, given";
  EXPECT_EQ(trial_variant("passkey", "Code {key}.", ""), "needle \"Code {key}.\"");
  EXPECT_EQ(trial_variant("passkey", "", "Which number?"), "question \"Which number?\"");
  EXPECT_EQ(trial_variant("passkey", "Code {key}.", "Which number?"), "needle \"Code {key}.\"; question \"Which number?\"");
  EXPECT_EQ(trial_variant("niah_single", "", "What is the special magic number for lion?"), "")
      << "niah_single asks a question per trial";

  test::TempDir dir;
  const std::string path = dir.file("r.jsonl");
  nlohmann::json usual = record("passkey", 0, true), reworded = record("passkey", 1, false), asked = record("", 2, true);
  usual["question"] = kQuestion;
  reworded["needle"] = "Code {key}.";
  asked["question"] = "Which number?";
  for (const auto& r : {usual, reworded, asked}) append_result(path, r);
  const Results res = load_results(path);
  EXPECT_TRUE(res.done.count(trial_id("full", "passkey", 1024, 0.5, 0, 1)));
  EXPECT_FALSE(res.done.count(trial_id("full", "passkey", 1024, 0.5, 1, 1))) << "trial 1 ran in other words only";
  EXPECT_TRUE(res.done.count(trial_id("full", "passkey", 1024, 0.5, 1, 1, "passkey", "needle \"Code {key}.\"")));
  EXPECT_FALSE(res.done.count(trial_id("full", "passkey", 1024, 0.5, 2, 1)));
  EXPECT_TRUE(res.done.count(trial_id("full", "passkey", 1024, 0.5, 2, 1, "passkey", "question \"Which number?\"")));

  const std::string t = render_tables(res.records);
  EXPECT_NE(t.find("### passkey: pass key found, by length (tokens)\n\n| config | 1024 | all |\n|---|---:|---:|\n"
                   "| full | 1/1 (100%) | 1/1 (100%) |\n"), std::string::npos) << t;
  EXPECT_NE(t.find("### passkey (needle \"Code {key}.\"): pass key found, by length (tokens)\n\n| config | 1024 | all "
                   "|\n|---|---:|---:|\n| full | 0/1 (0%) | 0/1 (0%) |\n"), std::string::npos) << t;
  EXPECT_NE(t.find("### passkey (question \"Which number?\"): by depth"), std::string::npos) << t;
  const nlohmann::json s = summary_json(res.records);
  EXPECT_EQ(s["haystacks"]["passkey"]["by_config"][0]["total"], 1) << "the usual wording's only";
  EXPECT_EQ(s["tasks"]["passkey (needle \"Code {key}.\")"]["haystacks"]["passkey"]["by_config"][0]["found"], 0);
}

TEST(TaskResults, TablesGroupByTaskAndShowTheScoreOfAllOfTasks) {
  std::vector<nlohmann::json> rs = {record("", 0, true), record("passkey", 1, false),
                                    record("niah_multivalue", 0, true, 1.0), record("niah_multivalue", 1, false, 0.5),
                                    record("niah_single", 0, true, 1.0)};
  const std::string t = render_tables(rs);
  EXPECT_NE(t.find("### passkey: pass key found, by length (tokens)\n\n| config | 1024 | all |\n|---|---:|---:|\n"
                   "| full | 1/2 (50%) | 1/2 (50%) |\n"),
            std::string::npos)
      << "old and new passkey records in one table, titled as before\n" << t;
  EXPECT_NE(t.find("### niah_multivalue on passkey: all 4 numbers found, by length (tokens)"), std::string::npos) << t;
  EXPECT_NE(t.find("| full | 1/2 (50%), score 0.75 | 1/2 (50%), score 0.75 |"), std::string::npos) << t;
  EXPECT_NE(t.find("### niah_single on passkey: number found, by length (tokens)"), std::string::npos) << t;
  EXPECT_NE(t.find("| full | 1/1 (100%) | 1/1 (100%) |"), std::string::npos) << "no score for a first-value task\n" << t;
  EXPECT_NE(t.find("### niah_multivalue on passkey: by depth"), std::string::npos) << t;

  const nlohmann::json s = summary_json(rs);
  EXPECT_EQ(s["haystacks"]["passkey"]["by_config"][0]["total"], 2) << "the passkey task's, as before";
  EXPECT_EQ(s["tasks"]["passkey"]["haystacks"]["passkey"]["by_config"][0]["found"], 1);
  EXPECT_EQ(s["tasks"]["niah_multivalue"]["haystacks"]["passkey"]["by_config"][0]["total"], 2);
  EXPECT_DOUBLE_EQ(s["tasks"]["niah_multivalue"]["haystacks"]["passkey"]["by_config"][0]["score"].get<double>(), 0.75);
}

// ---------------------------------------------------------------------------------------
// The command

constexpr double kQuick = 30;


TEST(TaskCli, UnknownTaskAndMisplacedQuestionAreUsageErrors) {
  const std::string model = test::real_model_path();
  EXPECT_TRUE(test::fails_cleanly(test::run_infinipot({"nih", "-m", model, "--task", "niah"}),
                                  {"--task", "'niah'", "passkey", "niah_single", "niah_uuid", "niah_multikey",
                                   "niah_multivalue", "niah_multiquery", "vt", "cwe"},
                                  2, kQuick));
  EXPECT_TRUE(test::fails_cleanly(test::run_infinipot({"nih", "-m", model, "--task", "vt,,cwe"}), {"--task"}, 2, kQuick));
  EXPECT_TRUE(test::fails_cleanly(test::run_infinipot({"nih", "-m", model, "--task", "niah_single", "--question", "Q?"}),
                                  {"--question", "niah_single"}, 2, kQuick));
  EXPECT_TRUE(test::fails_cleanly(test::run_infinipot({"nih", "-m", model, "--task", "passkey,vt", "--needle",
                                                       "The code is {key}."}),
                                  {"--needle", "vt"}, 2, kQuick));
  EXPECT_TRUE(test::fails_cleanly(test::run_infinipot({"nih", "-m", model, "--needle", "The code is 12345."}),
                                  {"--needle", "{key}"}, 2, kQuick));
  EXPECT_TRUE(test::fails_cleanly(test::run_infinipot({"nih", "-m", model, "--needle", " {key} "}),
                                  {"--needle", "words"}, 2, kQuick));
  EXPECT_TRUE(test::fails_cleanly(test::run_infinipot({"nih", "-m", model, "--needle", ""}), {"--needle", "{key}"}, 2,
                                  kQuick));
  EXPECT_TRUE(test::fails_cleanly(test::run_infinipot({"nih", "-m", model, "--question", " "}), {"--question", "empty"}, 2,
                                  kQuick));
}

// --needle end to end on the tiny model: the records carry the wording, and the usual
// wording's trials are not taken as done by it (nor the other way round).
TEST(TaskCli, ANeedleInOtherWordsRunsAsTrialsOfItsOwn) {
  test::TempDir dir;
  const std::string model = test::tiny_model(dir, 2048), out = dir.file("r.jsonl");
  const std::vector<std::string> usual = {"nih", "-m", model, "--lengths", "600", "--depths", "0.5",
                                          "--trials", "1", "--policy", "full", "-n", "2", "--out", out};
  std::vector<std::string> reworded = usual;
  reworded.insert(reworded.end(), {"--needle", "The vault opens with {key}."});
  auto r = test::run_infinipot(reworded, {{}, 300});
  ASSERT_TRUE(test::succeeded(r)) << r.describe();
  EXPECT_NE(r.err.find("1 trials to run, 0 already"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("### passkey (needle \"The vault opens with {key}.\"): pass key found"), std::string::npos) << r.out;
  r = test::run_infinipot(usual, {{}, 300});
  ASSERT_TRUE(test::succeeded(r)) << r.describe();
  EXPECT_NE(r.err.find("1 trials to run, 0 already"), std::string::npos) << "another wording's trial is not this one's\n" << r.err;
  r = test::run_infinipot(reworded, {{}, 120});
  ASSERT_TRUE(test::succeeded(r)) << r.describe();
  EXPECT_NE(r.err.find("0 trials to run, 1 already"), std::string::npos) << r.err;
  const Results res = load_results(out);
  ASSERT_EQ(res.records.size(), 2u);
  EXPECT_EQ(res.records[0].at("needle"), "The vault opens with {key}.");
  EXPECT_FALSE(res.records[1].contains("needle")) << "the usual wording's records stay as they were";
  EXPECT_EQ(res.records[0].at("key"), res.records[1].at("key")) << "the same key in other words";
}

// One tiny trial of every task through the real binary on a random-weight model: the
// records carry the task, its references and score, the task's -n, and a rerun skips them.
TEST(TaskCli, EveryTaskRunsEndToEndAndResumes) {
  test::TempDir dir;
  const std::string model = test::tiny_model(dir, 2048), out = dir.file("r.jsonl");
  std::string all;
  for (const auto& t : tasks()) all += (all.empty() ? "" : ",") + std::string(t->name());
  const std::vector<std::string> args = {"nih",    "-m",       model,   "--task", all,      "--lengths", "900",
                                         "--depths", "0.5",    "--trials", "1",   "--policy", "full",     "--out", out};
  auto r = test::run_infinipot(args, {{}, 600});
  ASSERT_TRUE(test::succeeded(r)) << r.describe();
  const Results res = load_results(out);
  ASSERT_EQ(res.records.size(), tasks().size());
  std::set<std::string> seen;
  for (const auto& rec : res.records) {
    SCOPED_TRACE(rec.dump());
    ASSERT_FALSE(rec.contains("error"));
    const Task& t = find_task(rec.at("task").get<std::string>());
    seen.insert(t.name());
    EXPECT_EQ(rec.at("n_predict"), t.default_n_predict());
    EXPECT_FALSE(rec.at("references").empty());
    EXPECT_EQ(rec.at("key"), rec.at("references")[0]);
    const double score = rec.at("score").get<double>();
    EXPECT_GE(score, 0.0);
    EXPECT_LE(score, 1.0);
    EXPECT_EQ(rec.at("found").get<bool>(), score == 1.0);
    // The score is the task's rule applied to the recorded answer.
    EXPECT_EQ(score, t.score(rec.at("answer"), rec.at("references").get<std::vector<std::string>>()).fraction);
    EXPECT_LE(std::abs(rec.at("doc_tokens").get<int>() - 900), 9);
    // CPU time of the trial: some was spent, and no more than all cores busy for its wall time.
    const double cpu = rec.at("cpu_s").get<double>(), wall = rec.at("wall_s").get<double>();
    EXPECT_GT(cpu, 0.0);
    EXPECT_LE(cpu, wall * std::max(1u, std::thread::hardware_concurrency()) + 0.05);
  }
  EXPECT_EQ(seen.size(), tasks().size());
  // Every record names the build that produced it, as `infinipot --version` does.
  const std::string build = test::infinipot_build_id();
  ASSERT_FALSE(build.empty());
  for (const auto& rec : res.records) EXPECT_EQ(rec.at("build"), build);
  // A rerun has nothing left to do; -n overrides every task's default for new trials.
  r = test::run_infinipot(args, {{}, 120});
  ASSERT_TRUE(test::succeeded(r)) << r.describe();
  EXPECT_NE(r.err.find("0 trials to run, 8 already"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("### vt on passkey: all 5 variables found"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("### passkey: pass key found"), std::string::npos) << r.out;
  std::vector<std::string> more = args;
  more[4] = "niah_single";
  more[10] = "2";  // --trials
  more.insert(more.end(), {"-n", "3"});
  r = test::run_infinipot(more, {{}, 300});
  ASSERT_TRUE(test::succeeded(r)) << r.describe();
  EXPECT_NE(r.err.find("1 trials to run, 1 already"), std::string::npos) << r.err;
  const Results again = load_results(out);
  ASSERT_EQ(again.records.size(), tasks().size() + 1);
  EXPECT_EQ(again.records.back().at("n_predict"), 3);
  EXPECT_EQ(again.records.back().at("trial"), 1);
}

// The ablations of --policy reach the pot: one passkey trial each on the tiny model. The
// records say what the pot saw: CaP-G's catalyst is the general prompt's length, not the
// question's, and without CR-RoPE the highest key position runs past the pot's size.
TEST(TaskCli, CatalystAndCrRopeAblationsReachThePot) {
  test::TempDir dir;
  const std::string model = test::tiny_model(dir, 2048), out = dir.file("r.jsonl");
  const std::string policies = "infinipot:pot=256,infinipot:pot=256:cr_rope=0,infinipot:pot=256:catalyst=general";
  auto r = test::run_infinipot({"nih", "-m", model, "--lengths", "900", "--depths", "0.5", "--trials", "1", "-n", "4",
                                "--policy", policies, "--out", out},
                               {{}, 300});
  ASSERT_TRUE(test::succeeded(r)) << r.describe();
  std::map<std::string, nlohmann::json> by_config;
  for (const auto& rec : load_results(out).records) by_config[rec.at("config").get<std::string>()] = rec;
  ASSERT_EQ(by_config.size(), 3u);
  for (const auto& [config, rec] : by_config) {
    SCOPED_TRACE(rec.dump());
    ASSERT_FALSE(rec.contains("error"));
    EXPECT_GT(rec.at("ccd_cycles").get<int>(), 0) << "900 tokens through a 256-entry pot distill";
  }
  const auto& base = by_config.at("infinipot:pot=256");
  const auto& no_rope = by_config.at("infinipot:pot=256:cr_rope=0");
  const auto& general = by_config.at("infinipot:pot=256:catalyst=general");
  EXPECT_LT(base.at("max_position").get<int>(), 256);
  EXPECT_LT(general.at("max_position").get<int>(), 256);
  EXPECT_GE(no_rope.at("max_position").get<int>(), base.at("prompt_tokens").get<int>() - 1)
      << "stream positions are kept: the last prompt token sits at its place in the stream";
  // The catalyst is "\n\n" + its text + the template's tail (Engine::catalyst_prompt).
  const auto count = test::tiny_token_counter();
  EXPECT_EQ(general.at("catalyst_tokens").get<int>() - base.at("catalyst_tokens").get<int>(),
            count(std::string("\n\n") + kGeneralCatalyst) - count(std::string("\n\n") + kQuestion));
  EXPECT_EQ(no_rope.at("catalyst_tokens"), base.at("catalyst_tokens"));
  EXPECT_EQ(general.at("question"), kQuestion) << "CaP-G changes the catalyst, not the question asked";
}

// Trials that share a document prefix resume from a snapshot of the pot (engine/prefix_forks.h)
// and must end exactly where a full read ends: the same answers, needle retention, cycles and
// positions (and the question's attention on the needle) as --no-prefix-sharing, for a scoring policy, an accumulating one (H2O), a
// recency one and a whole-input one (SnapKV: every trial of a cell holds the largest prompt's
// entries, so their stores have one size), on both kinds of haystack.
TEST(TaskCli, SharedPrefixesGiveTheRecordsOfFullReads) {
  test::TempDir dir;
  const std::string model = test::tiny_model(dir, 4096);
  auto run = [&](const std::string& out, bool share) {
    std::vector<std::string> args = {"nih", "-m", model, "--lengths", "1500", "--depths", "0.2,0.6,0.9", "--trials", "2",
                                     "-n", "4", "--haystacks", "passkey,prose", "--chunk", "64",
                                     "--policy", "infinipot:pot=256,h2o:pot=256,streaming:pot=256,snapkv:pot=256", "--out", out, "--pot-text",
                                     "--needle-attention"};
    if (!share) args.push_back("--no-prefix-sharing");
    auto r = test::run_infinipot(args, {{}, 900});
    EXPECT_TRUE(test::succeeded(r)) << r.describe();
    std::map<std::string, nlohmann::json> by_trial;
    for (const auto& rec : load_results(out).records)
      by_trial[trial_id(rec)] = rec;
    return by_trial;
  };
  const auto shared = run(dir.file("shared.jsonl"), true);
  const auto alone = run(dir.file("alone.jsonl"), false);
  ASSERT_EQ(shared.size(), 48u);
  ASSERT_EQ(alone.size(), shared.size());
  int resumed = 0;
  for (const auto& [id, rec] : shared) {
    SCOPED_TRACE(rec.dump());
    const auto& ref = alone.at(id);
    ASSERT_FALSE(rec.contains("error"));
    resumed += rec.at("resumed_at").get<int>() > 0;
    EXPECT_FALSE(ref.contains("resumed_at"));
    for (const char* field : {"answer", "found", "needle_kept", "ccd_cycles", "max_position", "prompt_tokens", "doc_tokens",
                              "pot_digest", "pot_text", "needle_attention"})
      EXPECT_EQ(rec.at(field), ref.at(field)) << field;
    // --needle-attention: the question's share on the needle, per layer, from the policies with
    // a catalyst (CaP's measure; SnapKV's observation window); null for the others.
    if (rec.at("policy") == "infinipot" || rec.at("policy") == "snapkv")
      EXPECT_TRUE(rec.at("needle_attention").at("share_per_layer").is_array());
    else
      EXPECT_TRUE(rec.at("needle_attention").is_null());
    // --pot-text: what the pot held, with the gaps its distillations left.
    EXPECT_NE(rec.at("pot_text").get<std::string>().find("[\u2026"), std::string::npos);
  }
  // 2 haystacks x 4 policies x 6 trials: all but the first of each group (the deepest needle)
  // share at least the 64-token chunks before the shallowest needle (at ~300 tokens).
  EXPECT_EQ(resumed, 2 * 4 * 5) << "every trial but the first of a group starts from a shared prefix";
}

// --checkpoint-dir: a run that stops inside a trial (here after its third save, as a killed
// run would) leaves the trial's pot on disk; the next run starts the trial from it and records
// what a whole read records. An unreadable checkpoint is removed with a warning and the trial
// read from its start. Files go once their trials are recorded.
TEST(TaskCli, CheckpointedTrialsEndAsWholeReads) {
  test::TempDir dir;
  const std::string model = test::tiny_model(dir, 4096);
  const std::string ckdir = dir.file("checkpoints");
  const std::string policies = "infinipot:pot=256,h2o:pot=256,snapkv:pot=256";
  auto run = [&](const std::string& out, const std::string& policy, std::vector<std::string> extra,
                 const std::string& chunk = "64") {
    std::vector<std::string> args = {"nih", "-m", model, "--lengths", "1500", "--depths", "0.5", "--trials", "1",
                                     "-n", "4", "--haystacks", "passkey", "--chunk", chunk,
                                     "--policy", policy, "--out", out};
    args.insert(args.end(), extra.begin(), extra.end());
    return test::run_infinipot(args, {{}, 900});
  };
  auto records = [&](const std::string& out) {
    std::map<std::string, nlohmann::json> by_policy;
    for (const auto& rec : load_results(out).records) by_policy[rec.at("policy")] = rec;
    return by_policy;
  };
  auto files = [&] {
    std::vector<std::string> names;
    if (std::filesystem::exists(ckdir))
      for (const auto& e : std::filesystem::directory_iterator(ckdir)) names.push_back(e.path().string());
    return names;
  };
  const auto whole = run(dir.file("whole.jsonl"), policies, {});
  ASSERT_TRUE(test::succeeded(whole)) << whole.describe();
  const auto ref = records(dir.file("whole.jsonl"));
  ASSERT_EQ(ref.size(), 3u);

  const std::vector<std::string> ck = {"--checkpoint-dir", ckdir, "--checkpoint-every", "0"};
  // A scoring policy, an accumulating one (H2O carries its sums) and a whole-input one; then
  // a file that is not a pot.
  for (const std::string policy : {"infinipot", "h2o", "snapkv", "corrupt"}) {
    SCOPED_TRACE(policy);
    const bool corrupt = policy == "corrupt";
    const std::string out = dir.file(policy + ".jsonl");
    const std::string spec = (corrupt ? "infinipot" : policy) + ":pot=256";
    std::vector<std::string> stop = ck;
    stop.insert(stop.end(), {"--checkpoint-stop", "3"});
    const auto stopped = run(out, spec, stop);
    EXPECT_EQ(stopped.exit_code, 75) << stopped.describe();
    EXPECT_TRUE(records(out).empty()) << "it stopped inside its trial";
    ASSERT_EQ(files().size(), 1u) << "the stopped trial's pot is on disk";
    if (corrupt) std::ofstream(files()[0], std::ios::binary | std::ios::trunc) << "not a pot";
    const auto resumed = run(out, spec, ck);
    ASSERT_TRUE(test::succeeded(resumed)) << resumed.describe();
    EXPECT_EQ(resumed.err.find("unreadable checkpoint") != std::string::npos, corrupt) << resumed.err;
    EXPECT_TRUE(files().empty()) << "a recorded trial's checkpoint goes";
    const auto got = records(out);
    ASSERT_EQ(got.size(), 1u);
    const nlohmann::json& rec = got.begin()->second;
    SCOPED_TRACE(rec.dump());
    ASSERT_FALSE(rec.contains("error"));
    EXPECT_EQ(rec.contains("checkpoint_at"), !corrupt) << "the stopped trial starts from its save";
    if (!corrupt) {  // three chunks read (of at most 64: the pot's room cuts some short)
      EXPECT_GT(rec.at("checkpoint_at").get<int>(), 3);
      EXPECT_LE(rec.at("checkpoint_at").get<int>(), 3 * 64);
      EXPECT_EQ(rec.at("resumed_at"), rec.at("checkpoint_at"));
    }
    for (const char* field : {"answer", "found", "needle_kept", "ccd_cycles", "max_position", "prompt_tokens", "pot_digest"})
      EXPECT_EQ(rec.at(field), ref.at(rec.at("policy").get<std::string>()).at(field)) << field;
  }
  // A checkpoint saved with other pot settings (H2O's pot under infinipot's trial, as a file
  // from another build would be): the trial becomes an error record naming it, the file goes,
  // and the next run reads the trial whole.
  {
    const std::string out = dir.file("foreign.jsonl");
    std::vector<std::string> stop = ck;
    stop.insert(stop.end(), {"--checkpoint-stop", "3"});
    EXPECT_EQ(run(out, "infinipot:pot=256", stop).exit_code, 75);
    ASSERT_EQ(files().size(), 1u);
    const std::string mine = files()[0];
    EXPECT_EQ(run(dir.file("other.jsonl"), "h2o:pot=256", stop).exit_code, 75);
    ASSERT_EQ(files().size(), 2u);
    const std::string other = files()[0] == mine ? files()[1] : files()[0];
    std::filesystem::rename(other, mine);
    run(out, "infinipot:pot=256", ck);
    const auto failed = records(out);
    ASSERT_EQ(failed.size(), 1u);
    EXPECT_EQ(failed.begin()->second.value("error", "").rfind("checkpoint: ", 0), 0u) << failed.begin()->second.dump();
    EXPECT_TRUE(files().empty()) << "the foreign checkpoint goes";
    const auto again = run(out, "infinipot:pot=256", ck);
    ASSERT_TRUE(test::succeeded(again)) << again.describe();
    nlohmann::json last;
    for (const auto& rec : load_results(out).records) last = rec;
    ASSERT_FALSE(last.contains("error")) << last.dump();
    EXPECT_FALSE(last.contains("checkpoint_at"));
    EXPECT_EQ(last.at("pot_digest"), ref.at("infinipot").at("pot_digest"));
  }
  // A pot saved under another chunk is not this trial's: the pot at a chunk boundary depends
  // on the chunking, so a run with --chunk 32 reads the trial whole, as a run without
  // checkpoints does, and leaves the other run's file alone.
  {
    std::vector<std::string> stop = ck;
    stop.insert(stop.end(), {"--checkpoint-stop", "3"});
    const std::string out = dir.file("chunk.jsonl");
    EXPECT_EQ(run(out, "infinipot:pot=256", stop).exit_code, 75);
    ASSERT_EQ(files().size(), 1u);
    const auto other_chunk = run(out, "infinipot:pot=256", ck, "32");
    ASSERT_TRUE(test::succeeded(other_chunk)) << other_chunk.describe();
    const auto got = records(out);
    ASSERT_EQ(got.size(), 1u);
    const nlohmann::json& rec = got.begin()->second;
    EXPECT_FALSE(rec.contains("checkpoint_at")) << rec.dump();
    EXPECT_EQ(files().size(), 1u) << "the --chunk 64 run's pot stays for that run";
    const auto whole32 = run(dir.file("whole32.jsonl"), "infinipot:pot=256", {}, "32");
    ASSERT_TRUE(test::succeeded(whole32)) << whole32.describe();
    EXPECT_EQ(rec.at("pot_digest"), records(dir.file("whole32.jsonl")).at("infinipot").at("pot_digest"));
  }
}

}  // namespace
}  // namespace infinipot::nih
