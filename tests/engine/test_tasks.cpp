// The nih tasks (engine/tasks/): what each one hides and asks, measured with the tiny
// model's real BPE tokenizer (no OpenCL): documents of the asked length in tokens, needles at
// their depths, values deterministic per seed, each task's own structure checked from its
// text by an independent reading (multikey's distractors, vt's chains, cwe's counts), the
// scoring rules, and the results file's task identity and tables. `infinipot nih --task`
// through the binary is in test_tasks_cli.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "engine/nih.h"
#include "engine/tasks/task_registry.h"
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
    EXPECT_NE(m.find("{task}"), std::string::npos) << m;
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

}  // namespace
}  // namespace infinipot::nih
