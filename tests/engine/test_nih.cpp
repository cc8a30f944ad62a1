// The pass-key benchmark's host logic (engine/nih.h): keys, documents measured with a real
// byte-level BPE tokenizer (the tiny model's), scoring, the policy list, the JSONL results
// file and the tables. No OpenCL; the last tests drive `infinipot nih` for its usage errors
// and --table-only, which need no device either.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "engine/nih.h"
#include "engine/prefix_forks.h"
#include "tests/support/cli_process.h"
#include "tests/support/gguf_test_util.h"
#include "tests/support/nih_text.h"
#include "tests/support/tiny_tokenizer.h"

namespace infinipot::nih {
namespace {

CountTokens tiny_count() { return test::tiny_token_counter(); }

using test::genesis;
using test::occurrences;
using test::read_all;

// ---------------------------------------------------------------------------------------
// Keys

TEST(NihKeys, DeterministicFiveDigitsAndSeedDependent) {
  EXPECT_EQ(derive_key(7, "passkey", 4096, 0.5, 3), derive_key(7, "passkey", 4096, 0.5, 3));
  std::set<std::string> keys;
  int differ_by_seed = 0, n = 0;
  for (int trial = 0; trial < 20; ++trial)
    for (double depth : {0.0, 0.1, 0.5, 0.9, 1.0})
      for (int length : {512, 4096, 131072}) {
        const std::string k = derive_key(1, "prose", length, depth, trial);
        ASSERT_EQ(k.size(), 5u) << k;
        ASSERT_GE(std::stoi(k), 10000);
        ASSERT_LE(std::stoi(k), 99999);
        keys.insert(k);
        differ_by_seed += k != derive_key(2, "prose", length, depth, trial);
        ++n;
      }
  EXPECT_GE(keys.size(), size_t(n * 0.95)) << "keys should look random across trials";
  EXPECT_GE(differ_by_seed, n * 0.95) << "another --seed must give other keys";
  // Each part of the identity matters.
  const std::string base = derive_key(1, "passkey", 4096, 0.5, 0);
  int changed = 0;
  changed += base != derive_key(1, "prose", 4096, 0.5, 0);
  changed += base != derive_key(1, "passkey", 8192, 0.5, 0);
  changed += base != derive_key(1, "passkey", 4096, 0.9, 0);
  changed += base != derive_key(1, "passkey", 4096, 0.5, 1);
  EXPECT_GE(changed, 3);
}

// ---------------------------------------------------------------------------------------
// Scoring

TEST(NihScoring, FirstIntegerDecides) {
  EXPECT_EQ(first_integer("The pass key is 12345."), "12345");
  EXPECT_EQ(first_integer("1234 5"), "1234");
  EXPECT_EQ(first_integer("12,345"), "12");
  EXPECT_FALSE(first_integer("I do not know the pass key.").has_value());
  EXPECT_FALSE(first_integer("").has_value());
  EXPECT_TRUE(key_found("The pass key is 12345.", "12345"));
  EXPECT_TRUE(key_found("12345", "12345"));
  EXPECT_FALSE(key_found("1234 5", "12345"));
  EXPECT_FALSE(key_found("No digits here", "12345"));
  EXPECT_FALSE(key_found("It is 123456.", "12345")) << "a longer run is another number";
  EXPECT_FALSE(key_found("Chapter 3 says the key is 12345", "12345")) << "only the first integer counts";
}

// ---------------------------------------------------------------------------------------
// Documents

TEST(NihDocuments, NeedleSentencesPutTheKeyInEverySlot) {
  EXPECT_EQ(needle("31415"), "The pass key is 31415. Remember it. 31415 is the pass key.");
  EXPECT_EQ(needle(kNeedle, "31415"), needle("31415"));
  EXPECT_EQ(needle("Code {key}, again {key}.", "7"), "Code 7, again 7.");
  EXPECT_EQ(needle("{key}{key}", "12"), "1212");
  EXPECT_EQ(needle("{ke} {key", "9"), "{ke} {key") << "only the whole slot";
  EXPECT_NO_THROW(check_needle("The code is {key}."));
  for (const char* bad : {"The code is 12345.", "", "{KEY} is the code", " {key} ", "{key}"}) {
    SCOPED_TRACE(bad);
    try {
      check_needle(bad);
      ADD_FAILURE() << "accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("{needle}"), std::string::npos) << e.what();
    }
  }
}

TEST(NihDocuments, ProseNormalisationKeepsParagraphs) {
  const Haystack h = prose_haystack("x", "  One line\r\nwrapped here.\r\n\r\n\r\n  Next   paragraph.\n");
  EXPECT_EQ(h.text, "One line wrapped here.\n\nNext paragraph.");
  EXPECT_THROW(prose_haystack("blank", " \n\t \r\n"), std::invalid_argument);
  EXPECT_THROW(prose_haystack("empty", ""), std::invalid_argument);
}

TEST(NihDocuments, PasskeyDocumentHasTheTemplateAndOneNeedleAtItsDepth) {
  DocumentBuilder b(passkey_haystack(), tiny_count());
  const std::string sentence = "The grass is green. ";  // the longest filler sentence is shorter than this
  for (double depth : {0.0, 0.1, 0.25, 0.5, 0.9, 1.0}) {
    const std::string key = derive_key(3, "passkey", 1500, depth, 0);
    const Document d = b.build(1500, depth, key);
    SCOPED_TRACE("depth " + std::to_string(depth) + "\n" + d.text.substr(0, 400));
    EXPECT_EQ(d.text.rfind(kTaskLine, 0), 0u) << "the task line opens the document";
    EXPECT_EQ(occurrences(d.text, needle(key)), 1u);
    EXPECT_EQ(occurrences(d.text, "pass key is"), 1u);
    EXPECT_EQ(occurrences(d.text, key), 2u);
    EXPECT_EQ(d.text.find(needle(key)), d.needle_at);
    EXPECT_EQ(d.key, key);
    // Where it is: the share of the filler before it, within one sentence of the depth.
    const size_t region = std::string(kTaskLine).size() + 1;
    const double filler = double(d.text.size() - needle(key).size() - 1 - region);
    const double share = double(d.needle_at - region) / filler;
    EXPECT_NEAR(share, depth, sentence.size() / filler) << "needle at byte " << d.needle_at;
    EXPECT_NEAR(d.needle_depth, depth, sentence.size() / filler);
    // At a sentence boundary: a full stop (then a space) before it, a capital after it.
    ASSERT_GE(d.needle_at, 2u);
    EXPECT_EQ(d.text.substr(d.needle_at - 2, 2), ". ");
    if (depth < 1.0) {
      const size_t after = d.needle_at + needle(key).size();
      ASSERT_LT(after + 1, d.text.size());
      EXPECT_EQ(d.text[after], ' ');
      EXPECT_TRUE(std::isupper(static_cast<unsigned char>(d.text[after + 1]))) << d.text.substr(after, 20);
    }
    // Taking the needle out leaves the filler intact.
    std::string rest = d.text;
    rest.erase(d.needle_at, needle(key).size() + (depth < 1.0 ? 1 : 0));
    if (depth == 1.0) rest.pop_back();
    EXPECT_EQ(occurrences(rest, "pass key"), 0u);
    EXPECT_EQ(rest.find(std::string(kTaskLine) + " " + kFiller + " " + kFiller), 0u);
  }
}

TEST(NihDocuments, ProseNeedleGoesInAtASentenceStartNearTheDepth) {
  DocumentBuilder b(genesis(), tiny_count());
  for (double depth : {0.0, 0.3, 0.5, 0.75, 1.0}) {
    const std::string key = derive_key(1, "prose", 3000, depth, 2);
    const Document d = b.build(3000, depth, key);
    SCOPED_TRACE("depth " + std::to_string(depth));
    EXPECT_EQ(occurrences(d.text, needle(key)), 1u);
    EXPECT_EQ(occurrences(d.text, key), 2u);
    ASSERT_EQ(d.text.find(needle(key)), d.needle_at);
    if (d.needle_at > 0) {
      size_t q = d.needle_at;
      while (q > 0 && (d.text[q - 1] == ' ' || d.text[q - 1] == '\n')) --q;
      const char before = d.text[q - 1];
      const bool paragraph = d.text.compare(q, 2, "\n\n") == 0;
      EXPECT_TRUE(paragraph || before == '.' || before == '?' || before == '!')
          << "before the needle: ..." << d.text.substr(q > 60 ? q - 60 : 0, 60);
    }
    // Genesis's longest sentences run to ~1,000 bytes; the needle is within that of its depth.
    EXPECT_NEAR(d.needle_depth, depth, 1000.0 / (d.text.size() - needle(key).size()));
  }
  // Depth 0 and 1 are the very start and end.
  EXPECT_EQ(b.build(3000, 0.0, "11111").needle_at, 0u);
  const Document end = b.build(3000, 1.0, "22222");
  EXPECT_EQ(end.needle_at + needle("22222").size(), end.text.size());
}

TEST(NihDocuments, LengthInTokensIsWithinOnePercentAndHonest) {
  for (const Haystack& h : {passkey_haystack(), genesis()}) {
    DocumentBuilder b(h, tiny_count());
    for (int target : {200, 1000, 4096, 20000}) {
      const Document d = b.build(target, 0.5, derive_key(0, h.name, target, 0.5, 0));
      SCOPED_TRACE(h.name + " " + std::to_string(target));
      EXPECT_LE(std::abs(d.tokens - target), std::max(1, target / 100)) << "got " << d.tokens;
      EXPECT_EQ(d.tokens, tiny_count()(d.text)) << "the count reported is the tokenizer's";
      EXPECT_EQ(d.target, target);
    }
  }
}

// The long Genesis text is cycled when a length asks for more than it has.
TEST(NihDocuments, ShortProseIsCycled) {
  const Haystack h = prose_haystack("short", "A cat sat on a mat. It was warm there.");
  DocumentBuilder b(h, tiny_count());
  const Document d = b.build(600, 0.5, "54321");
  EXPECT_LE(std::abs(d.tokens - 600), 6);
  EXPECT_GT(occurrences(d.text, "A cat sat on a mat."), 10u);
  EXPECT_EQ(occurrences(d.text, needle("54321")), 1u);
}

// Frugal: a length is cut once, then each further document of it costs two small counts
// (needle, document), not a new search.
TEST(NihDocuments, TokenizesEachLengthOnlyAFewTimes) {
  DocumentBuilder b(genesis(), tiny_count());
  b.build(8000, 0.5, "12345");
  const int first = b.tokenizations();
  EXPECT_LE(first, 8) << "sample + a few cuts + needle + document";
  for (int trial = 0; trial < 6; ++trial) b.build(8000, trial / 5.0, derive_key(9, "prose", 8000, trial / 5.0, trial));
  EXPECT_LE(b.tokenizations() - first, 6 * 2 + 4);
  // Bytes tokenized: a handful of 8K-token texts, not dozens.
  EXPECT_LT(b.bytes_tokenized(), 20u * 8000 * 4);
}

// ---------------------------------------------------------------------------------------
// --policy and the other lists

TEST(NihLists, PolicyEntriesAndTheirCanonicalConfig) {
  const auto p = parse_policies("full, infinipot ,h2o:pot=2048:keep=512,infinipot:nuc_ratio=0.25:pool=1,h2o:recent=64",
                                1024, 0);
  ASSERT_EQ(p.size(), 5u);
  EXPECT_EQ(p[0].config(), "full");
  EXPECT_FALSE(p[0].holds_pot());
  EXPECT_EQ(p[0].pot, 0);
  EXPECT_EQ(p[1].config(), "infinipot:pot=1024");
  EXPECT_EQ(p[2].config(), "h2o:pot=2048:keep=512");
  EXPECT_EQ(p[2].pot, 2048);
  EXPECT_EQ(p[2].keep, 512);
  EXPECT_TRUE(p[2].given & bit(Setting::Keep));
  EXPECT_EQ(p[3].config(), "infinipot:pot=1024:nuc_ratio=0.25:pool=1");
  EXPECT_FLOAT_EQ(p[3].nuc_ratio, 0.25f);
  EXPECT_EQ(p[4].config(), "h2o:pot=1024:recent=64");
  // The global --keep applies, and the same settings give the same config however given.
  EXPECT_EQ(parse_policies("streaming", 2048, 256)[0].config(), "streaming:pot=2048:keep=256");
  EXPECT_EQ(parse_policies("streaming:pot=2048:keep=256", 1, 0)[0].config(), "streaming:pot=2048:keep=256");
  EXPECT_FALSE(parse_policies("streaming", 2048, 256)[0].given & bit(Setting::Keep));
  // Word runs are the default and are left out; the three ablations are named.
  const auto u = parse_policies("infinipot:units=word,cap:units=alnum,nuc:units=token,infinipot:units=plain", 1024, 0);
  EXPECT_EQ(u[0].config(), "infinipot:pot=1024");
  EXPECT_EQ(u[0].units, UnitRule::Word);
  EXPECT_EQ(u[1].config(), "cap:pot=1024:units=alnum");
  EXPECT_EQ(u[1].units, UnitRule::Alnum);
  EXPECT_EQ(u[2].config(), "nuc:pot=1024:units=token");
  EXPECT_EQ(u[2].units, UnitRule::Token);
  EXPECT_EQ(u[3].config(), "infinipot:pot=1024:units=plain");
  EXPECT_EQ(u[3].units, UnitRule::Plain);
}

// The ablations of Tables 2 and 4: named in the config only when off their default, so the
// records written before they existed keep their config strings (and a rerun resumes them).
TEST(NihLists, CatalystAndCrRopeAblationsAreNamedOnlyWhenOffTheDefault) {
  const auto p = parse_policies("infinipot:catalyst=general,infinipot:cr_rope=0,cap:catalyst=question:cr-rope=1,"
                                "infinipot:cr_rope=0:catalyst=general:nuc_ratio=0.25,infinipot:pot=2048",
                                1024, 0);
  ASSERT_EQ(p.size(), 5u);
  EXPECT_EQ(p[0].config(), "infinipot:pot=1024:catalyst=general");
  EXPECT_TRUE(p[0].general_catalyst);
  EXPECT_EQ(p[0].positions, PositionRule::Auto) << "the model's rule, resolved when the pot is made";
  EXPECT_EQ(p[1].config(), "infinipot:pot=1024:cr_rope=0");
  EXPECT_EQ(p[1].positions, PositionRule::Stream);
  EXPECT_FALSE(p[1].general_catalyst);
  EXPECT_EQ(p[2].config(), "cap:pot=1024") << "reset, given, is left out (what no rule has always meant)";
  EXPECT_TRUE(p[2].positions == PositionRule::Reset && !p[2].general_catalyst);
  EXPECT_EQ(p[3].config(), "infinipot:pot=1024:nuc_ratio=0.25:catalyst=general:cr_rope=0");
  EXPECT_EQ(p[4].config(), "infinipot:pot=2048");
  // positions=stream is cr_rope=0 (one config, the older name); fit is named; reset is left
  // out; auto is named by what the model makes it (resolve_positions).
  const auto q = parse_policies("infinipot:positions=fit,cap:positions=reset,h2o:positions=stream,nuc:positions=auto",
                                1024, 0);
  ASSERT_EQ(q.size(), 4u);
  EXPECT_EQ(q[0].config(), "infinipot:pot=1024:positions=fit");
  EXPECT_EQ(q[0].positions, PositionRule::Fit);
  EXPECT_EQ(q[1].config(), "cap:pot=1024");
  EXPECT_EQ(q[2].config(), "h2o:pot=1024:cr_rope=0");
  EXPECT_EQ(q[3].positions, PositionRule::Auto);
  // Resolved: gaps on Gemma 3 (named), reset on llama (left out); a spec that then repeats a
  // config is dropped.
  auto gemma = parse_policies("infinipot,infinipot:positions=gaps,cap:positions=reset,h2o:cr_rope=0", 1024, 0);
  resolve_positions(gemma, "gemma3");
  ASSERT_EQ(gemma.size(), 3u);
  EXPECT_EQ(gemma[0].config(), "infinipot:pot=1024:positions=gaps");
  EXPECT_EQ(gemma[1].config(), "cap:pot=1024");
  EXPECT_EQ(gemma[2].config(), "h2o:pot=1024:cr_rope=0");
  auto llama = parse_policies("infinipot,nuc:positions=auto", 1024, 0);
  resolve_positions(llama, "llama");
  EXPECT_EQ(llama[0].config(), "infinipot:pot=1024");
  EXPECT_EQ(llama[1].positions, PositionRule::Reset);
  EXPECT_THROW(parse_policies("infinipot:cr_rope=0,infinipot:positions=stream", 1024, 0), std::invalid_argument);
  // gaps is named, its width only when not the default (so gap=256 given is the same config).
  const auto g = parse_policies("infinipot:positions=gaps,h2o:positions=gaps:gap=16,cap:positions=gaps:gap=256", 1024, 0);
  ASSERT_EQ(g.size(), 3u);
  EXPECT_EQ(g[0].config(), "infinipot:pot=1024:positions=gaps");
  EXPECT_EQ(g[0].positions, PositionRule::Gaps);
  EXPECT_EQ(g[1].config(), "h2o:pot=1024:positions=gaps:gap=16");
  EXPECT_EQ(g[1].gap, 16);
  EXPECT_EQ(g[2].config(), "cap:pot=1024:positions=gaps");
  EXPECT_THROW(parse_policies("infinipot:positions=gaps,infinipot:positions=gaps:gap=256", 1024, 0), std::invalid_argument);
  // The same ablation given twice in other words is one config.
  EXPECT_THROW(parse_policies("infinipot:cr_rope=0,infinipot:cr-rope=0", 1024, 0), std::invalid_argument);
  EXPECT_THROW(parse_policies("infinipot,infinipot:catalyst=question", 1024, 0), std::invalid_argument);
}

TEST(NihLists, BadPolicyEntriesNameTheProblem) {
  auto message = [](const std::string& list, int pot = 1024, int keep = 0) {
    try {
      parse_policies(list, pot, keep);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("(accepted)");
  };
  EXPECT_NE(message("").find("empty entry"), std::string::npos);
  EXPECT_NE(message("full,,h2o").find("empty entry"), std::string::npos);
  EXPECT_NE(message("h2o:pot").find("not key=value"), std::string::npos);
  EXPECT_NE(message("h2o:size=3").find("unknown setting 'size'"), std::string::npos);
  // An unknown name: the registry's own words, the flag named once ("{policy} must be one of").
  const std::string unknown = message("bogus,full");
  EXPECT_EQ(unknown.rfind("{policy} must be one of", 0), 0u) << unknown;
  EXPECT_EQ(unknown.find("{policy} {policy}"), std::string::npos) << unknown;
  EXPECT_NE(unknown.find("'bogus'"), std::string::npos) << unknown;
  EXPECT_NE(message("h2o:pot=0").find("pot=0"), std::string::npos);
  EXPECT_NE(message("h2o:pot=12x").find("pot=12x"), std::string::npos);
  EXPECT_NE(message("infinipot:nuc_ratio=1.5").find("[0, 1]"), std::string::npos);
  EXPECT_NE(message("h2o:nuc_ratio=0.5").find("h2o: nuc_ratio does not apply"), std::string::npos);
  EXPECT_NE(message("infinipot:nuc_stride=0").find("a stride in 1..64"), std::string::npos);
  EXPECT_NE(message("infinipot:nuc_stride=65").find("a stride in 1..64"), std::string::npos);
  EXPECT_NE(message("cap:nuc_stride=4").find("cap: nuc_stride does not apply"), std::string::npos);
  EXPECT_NE(message("tova:nuc_stride=4").find("tova: nuc_stride does not apply"), std::string::npos);
  {
    const auto q = parse_policies("infinipot:nuc_stride=4,nuc:nuc_stride=2,infinipot:nuc_stride=1", 1024, 0);
    EXPECT_EQ(q[0].config(), "infinipot:pot=1024:nuc_stride=4");
    EXPECT_EQ(q[0].options().params.nuc_stride, 4);
    EXPECT_EQ(q[1].options().params.nuc_stride, 2);
    EXPECT_EQ(q[2].config(), "infinipot:pot=1024");  // the default, left out of the label
  }
  EXPECT_NE(message("infinipot:units=words").find("word, plain, alnum or token"), std::string::npos);
  EXPECT_NE(message("infinipot:cr_rope=no").find("cr_rope=no is not 0 or 1"), std::string::npos);
  EXPECT_NE(message("infinipot:positions=squeeze").find("positions=squeeze is not reset, stream, fit, gaps or auto"),
            std::string::npos);
  EXPECT_NE(message("infinipot:gap=16").find("add positions=gaps"), std::string::npos);
  EXPECT_NE(message("infinipot:positions=fit:gap=16").find("add positions=gaps"), std::string::npos);
  EXPECT_NE(message("infinipot:positions=gaps:gap=0").find("gap=0 is not a distance of at least 1"), std::string::npos);
  EXPECT_NE(message("full:positions=fit").find("full: positions does not apply"), std::string::npos);
  EXPECT_NE(message("infinipot:catalyst=q").find("catalyst=q is not general or question"), std::string::npos);
  EXPECT_NE(message("full:cr_rope=0").find("full: cr_rope does not apply"), std::string::npos);
  EXPECT_NE(message("full:catalyst=general").find("full: catalyst does not apply"), std::string::npos);
  EXPECT_NE(message("full:pot=100").find("full: pot does not apply"), std::string::npos);
  // Each setting is its own row of the table: ahead is not pool (tova reads neither, snapkv
  // reads pool only), keep is refused for snapkv, whose pot size is what it keeps.
  EXPECT_NE(message("tova:ahead=2").find("tova: ahead does not apply"), std::string::npos);
  EXPECT_NE(message("snapkv:ahead=2").find("snapkv: ahead does not apply"), std::string::npos);
  EXPECT_NE(message("snapkv:keep=64").find("snapkv: keep does not apply"), std::string::npos);
  EXPECT_EQ(message("snapkv:pool=2"), "(accepted)");
  EXPECT_EQ(message("full:ctx=4096"), "(accepted)");
  EXPECT_NE(message("infinipot:ctx=4096").find("infinipot: ctx does not apply"), std::string::npos);
  EXPECT_NE(message("h2o:pot=100:keep=100").find("must be below"), std::string::npos);
  EXPECT_NE(message("h2o", 512, 600).find("must be below"), std::string::npos);
  EXPECT_NE(message("h2o", 0, 0).find("needs a pot size"), std::string::npos);
  EXPECT_NE(message("h2o,h2o:pot=1024").find("twice"), std::string::npos);
  EXPECT_NE(message(":pot=3").find("policy name"), std::string::npos);
  EXPECT_EQ(message("full", 0, 0), "(accepted)") << "full needs no pot";
}

TEST(NihLists, LengthsDepthsAndNames) {
  EXPECT_EQ(parse_lengths("4096, 8192", "--lengths"), (std::vector<int>{4096, 8192}));
  EXPECT_EQ(parse_lengths("4K,128k,1M", "--lengths"), (std::vector<int>{4096, 131072, 1048576}));
  for (const char* bad : {"", "0", "-5", "4096,", "32M", "4G", "x", "12.5", "4096,4096", "4K,4096"})
    EXPECT_THROW(parse_lengths(bad, "--lengths"), std::invalid_argument) << bad;
  EXPECT_EQ(parse_depths("0,0.5,1", "--depths"), (std::vector<double>{0.0, 0.5, 1.0}));
  for (const char* bad : {"", "1.5", "-0.1", "nan", "0.5x", "0.5,0.5"})
    EXPECT_THROW(parse_depths(bad, "--depths"), std::invalid_argument) << bad;
  EXPECT_EQ(parse_names("passkey,prose", "--haystacks"), (std::vector<std::string>{"passkey", "prose"}));
  EXPECT_THROW(parse_names("passkey,,prose", "--haystacks"), std::invalid_argument);
  EXPECT_THROW(parse_names("pass key", "--haystacks"), std::invalid_argument);
  EXPECT_THROW(parse_names("prose,prose", "--haystacks"), std::invalid_argument);
}

// ---------------------------------------------------------------------------------------
// Results file

nlohmann::json record(const std::string& config, const std::string& hay, int length, double depth, int trial,
                      bool found, uint64_t seed = 1) {
  return {{"config", config}, {"haystack", hay}, {"length", length}, {"depth", depth},
          {"trial", trial},   {"seed", seed},    {"found", found},   {"answer", found ? "12345" : "no"}};
}

// Several nih processes may append to one results file (a queue of workers), while one more
// starts and loads it (dropping a torn last line if it sees one). Records longer than stdio's
// buffer (answers of 6,000 bytes), 4 writers x 40 records and a reader loading all along:
// every record arrives whole, on its own line, and nothing is dropped.
TEST(NihResults, ProcessesAppendingAtOnceLoseAndTearNothing) {
  test::TempDir dir;
  const std::string path = dir.file("shared.jsonl");
  constexpr int kWriters = 4, kRecords = 40;
  std::vector<pid_t> kids;
  for (int w = 0; w <= kWriters; ++w) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      int status = 0;
      try {
        for (int i = 0; i < kRecords; ++i) {
          if (w == kWriters) {
            (void)load_results(path);  // the reader: a worker starting up, repair on
            continue;
          }
          nlohmann::json r = record("w" + std::to_string(w), "passkey", 512, 0.5, i, true);
          r["answer"] = std::string(6000, char('a' + w));
          append_result(path, r);
        }
      } catch (...) {
        status = 1;
      }
      _exit(status);
    }
    kids.push_back(pid);
  }
  for (pid_t pid : kids) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "a child failed";
  }
  const Results r = load_results(path, false);
  EXPECT_TRUE(r.warnings.empty()) << r.warnings.front();
  ASSERT_EQ(r.records.size(), size_t(kWriters * kRecords));
  std::set<std::string> seen;
  for (const auto& rec : r.records) {
    const std::string w = rec["config"];
    EXPECT_EQ(rec["answer"], std::string(6000, char('a' + (w[1] - '0')))) << "a record mixed with another";
    seen.insert(w + "/" + std::to_string(rec["trial"].get<int>()));
  }
  EXPECT_EQ(seen.size(), size_t(kWriters * kRecords));
}

TEST(NihResults, ResumeSkipsFinishedTrialsAndSurvivesATruncatedLastLine) {
  test::TempDir dir;
  const std::string path = dir.file("r.jsonl");
  EXPECT_TRUE(load_results(path).records.empty()) << "a missing file is an empty one";
  append_result(path, record("full", "passkey", 512, 0.5, 0, true));
  append_result(path, record("full", "passkey", 512, 0.5, 1, false));
  nlohmann::json err = record("h2o:pot=64", "passkey", 512, 0.5, 0, false);
  err["error"] = "budget";
  append_result(path, err);
  {  // a crash in the middle of writing the next record
    std::ofstream f(path, std::ios::app | std::ios::binary);
    f << R"({"config": "full", "haystack": "passkey", "len)";
  }
  Results r = load_results(path);
  ASSERT_EQ(r.records.size(), 3u);
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_NE(r.warnings[0].find("line 4"), std::string::npos) << r.warnings[0];
  EXPECT_TRUE(r.done.count(trial_id("full", "passkey", 512, 0.5, 0, 1)));
  EXPECT_TRUE(r.done.count(trial_id("full", "passkey", 512, 0.5, 1, 1)));
  EXPECT_FALSE(r.done.count(trial_id("full", "passkey", 512, 0.5, 2, 1)));
  EXPECT_FALSE(r.done.count(trial_id("full", "passkey", 512, 0.5, 0, 2))) << "another seed is another trial";
  EXPECT_FALSE(r.done.count(trial_id("h2o:pot=64", "passkey", 512, 0.5, 0, 1))) << "errors are tried again";
  // The torn line was dropped, so the next append starts a clean line.
  append_result(path, record("full", "passkey", 512, 0.5, 2, true));
  r = load_results(path);
  EXPECT_EQ(r.records.size(), 4u);
  EXPECT_TRUE(r.warnings.empty());
  EXPECT_TRUE(r.done.count(trial_id("full", "passkey", 512, 0.5, 2, 1)));
  // Without repair (--table-only) the file is left as it is.
  {
    std::ofstream f(path, std::ios::app | std::ios::binary);
    f << "{\"trunc";
  }
  const auto size = std::filesystem::file_size(path);
  r = load_results(path, false);
  EXPECT_EQ(r.warnings.size(), 1u);
  EXPECT_EQ(std::filesystem::file_size(path), size);
  // A record written without its newline (never by us, but by hand) is still read, and the
  // next append starts a new line.
  load_results(path);
  {
    std::ofstream f(path, std::ios::app | std::ios::binary);
    f << record("full", "passkey", 512, 0.5, 3, true).dump();
  }
  append_result(path, record("full", "passkey", 512, 0.5, 4, true));
  r = load_results(path);
  EXPECT_TRUE(r.warnings.empty());
  EXPECT_EQ(r.records.size(), 6u);
}

TEST(NihResults, ACorruptLineBeforeTheLastIsAnError) {
  test::TempDir dir;
  const std::string path = dir.file("r.jsonl");
  {
    std::ofstream f(path);
    f << record("full", "passkey", 512, 0.5, 0, true).dump() << "\nnot json\n"
      << record("full", "passkey", 512, 0.5, 1, true).dump() << "\n";
  }
  try {
    load_results(path);
    FAIL() << "a bad line in the middle was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("line 2"), std::string::npos) << e.what();
  }
}

// ---------------------------------------------------------------------------------------
// Tables

TEST(NihTables, FoundOverTotalByLengthAndDepth) {
  std::vector<nlohmann::json> rs;
  // infinipot: 4096 -> 3 of 4 (the 0.9 depth misses once); 8192 -> 1 of 2, one error.
  rs.push_back(record("infinipot:pot=1024", "passkey", 4096, 0.1, 0, true));
  rs.push_back(record("infinipot:pot=1024", "passkey", 4096, 0.1, 1, true));
  rs.push_back(record("infinipot:pot=1024", "passkey", 4096, 0.9, 0, true));
  rs.push_back(record("infinipot:pot=1024", "passkey", 4096, 0.9, 1, false));
  rs.push_back(record("infinipot:pot=1024", "passkey", 8192, 0.1, 0, true));
  rs.push_back(record("infinipot:pot=1024", "passkey", 8192, 0.9, 0, false));
  nlohmann::json e = record("infinipot:pot=1024", "passkey", 8192, 0.9, 1, false);
  e["error"] = "refused";
  rs.push_back(e);
  // full: only 4096; an error later replaced by an answer.
  nlohmann::json fe = record("full", "passkey", 4096, 0.1, 0, false);
  fe["error"] = "budget";
  rs.push_back(fe);
  rs.push_back(record("full", "passkey", 4096, 0.1, 0, true));
  rs.push_back(record("full", "passkey", 4096, 0.9, 0, true));
  // A prose table too.
  rs.push_back(record("full", "prose", 4096, 0.5, 0, false));
  const std::string want =
      "### passkey: pass key found, by length (tokens)\n\n"
      "| config | 4096 | 8192 | all |\n"
      "|---|---:|---:|---:|\n"
      "| infinipot:pot=1024 | 3/4 (75%) | 1/2 (50%) +1 err | 4/6 (67%) +1 err |\n"
      "| full | 2/2 (100%) |  | 2/2 (100%) |\n"
      "\n### passkey: by depth\n\n"
      "| config | length | 0.1 | 0.9 |\n"
      "|---|---:|---:|---:|\n"
      "| infinipot:pot=1024 | 4096 | 2/2 (100%) | 1/2 (50%) |\n"
      "| infinipot:pot=1024 | 8192 | 1/1 (100%) | 0/1 (0%) +1 err |\n"
      "| full | 4096 | 1/1 (100%) | 1/1 (100%) |\n"
      "\n"
      "### prose: pass key found, by length (tokens)\n\n"
      "| config | 4096 | all |\n"
      "|---|---:|---:|\n"
      "| full | 0/1 (0%) | 0/1 (0%) |\n"
      "\n### prose: by depth\n\n"
      "| config | length | 0.5 |\n"
      "|---|---:|---:|\n"
      "| full | 4096 | 0/1 (0%) |\n"
      "\n";
  EXPECT_EQ(render_tables(rs), want);
  EXPECT_EQ(render_tables({}), "no results yet\n");

  const nlohmann::json s = summary_json(rs);
  const auto& by_length = s["haystacks"]["passkey"]["by_length"];
  ASSERT_EQ(by_length.size(), 3u);
  EXPECT_EQ(by_length[1], (nlohmann::json{{"config", "infinipot:pot=1024"}, {"length", 8192}, {"found", 1},
                                          {"total", 2}, {"errors", 1}}));
  EXPECT_EQ(s["haystacks"]["passkey"]["by_depth"].size(), 6u);
  EXPECT_EQ(s["haystacks"]["prose"]["by_config"][0]["total"], 1);
}

// The resources table: peak memory is the maximum, cycles the median, and the time columns use
// only trials that read their whole document (resumed_at 0 or absent); errors are left out.
// CPU seconds come from the records that have them ("-" for a cell with none).
TEST(NihTables, ResourcesPerCellUseFullReadsForTime) {
  std::vector<nlohmann::json> rs;
  auto with = [](nlohmann::json r, double peak, double rss, int cycles, double wall, double tps, int resumed) {
    r["peak_device_bytes"] = peak;
    r["host_peak_rss"] = rss;
    r["ccd_cycles"] = cycles;
    r["wall_s"] = wall;
    r["prefill_tok_s"] = tps;
    if (resumed >= 0) r["resumed_at"] = resumed;
    return r;
  };
  const double MiB = 1 << 20;
  rs.push_back(with(record("infinipot:pot=1024", "passkey", 8192, 0.9, 0, true), 170 * MiB, 300 * MiB, 15, 60, 130, 0));
  rs.push_back(with(record("infinipot:pot=1024", "passkey", 8192, 0.5, 0, true), 172 * MiB, 310 * MiB, 15, 30, 90, 4000));
  rs.push_back(with(record("infinipot:pot=1024", "prose", 8192, 0.9, 0, true), 171 * MiB, 305 * MiB, 16, 70, 120, -1));
  rs[0]["cpu_s"] = 50.0;
  rs[1]["cpu_s"] = 9.0;  // resumed: not a full read
  rs.push_back(with(record("infinipot:pot=1024", "passkey", 4096, 0.9, 0, true), 170 * MiB, 300 * MiB, 7, 30, 140, 0));
  nlohmann::json e = with(record("infinipot:pot=1024", "prose", 8192, 0.1, 0, false), 999 * MiB, 999 * MiB, 1, 1, 1, 0);
  e["error"] = "refused";
  rs.push_back(e);
  const std::string t = render_tables(rs);
  EXPECT_NE(t.find("### Resources per cell"), std::string::npos) << t;
  EXPECT_NE(t.find("| infinipot:pot=1024 | 8192 | 3 | 172 | 310 | 15 | 65 | 50 | 125 |"), std::string::npos) << t;
  EXPECT_NE(t.find("| infinipot:pot=1024 | 4096 | 1 | 170 | 300 | 7 | 30 | - | 140 |"), std::string::npos) << t;
}

TEST(NihTables, AllErrorsSayError) {
  nlohmann::json e = record("full", "passkey", 65536, 0.5, 0, false);
  e["error"] = "budget";
  EXPECT_NE(render_tables({e}).find("| full | error (1) | error (1) |"), std::string::npos) << render_tables({e});
}

// ---------------------------------------------------------------------------------------
// The command: usage errors and --table-only (no device needed)

constexpr double kQuick = 30;

TEST(NihCli, UsageErrorsExitTwoNamingTheFlag) {
  const std::string model = test::real_model_path();
  auto nih = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {"nih", "-m", model});
    return test::run_infinipot(args);
  };
  EXPECT_TRUE(test::fails_cleanly(nih({"--lengths", "4096,abc"}), {"--lengths", "abc"}, 2, kQuick));
  EXPECT_TRUE(test::fails_cleanly(nih({"--depths", "1.5"}), {"--depths", "1.5"}, 2, kQuick));
  EXPECT_TRUE(test::fails_cleanly(nih({"--policy", "h2o:size=3"}), {"--policy", "size"}, 2, kQuick));
  EXPECT_TRUE(test::fails_cleanly(nih({"--policy", "nosuchpolicy"}), {"--policy", "nosuchpolicy", "infinipot"}, 2,
                                  kQuick));
  EXPECT_TRUE(test::fails_cleanly(nih({"--haystacks", "passkey,nosuch"}), {"--haystacks", "nosuch", "prose"}, 2, kQuick));
  EXPECT_TRUE(test::fails_cleanly(nih({"--haystack", "noequals"}), {"--haystack", "NAME=FILE"}, 2, kQuick));
  EXPECT_TRUE(test::fails_cleanly(nih({"--trials", "0"}), {"--trials"}, 2, kQuick));
  // catalyst=general is refused, before the model loads, by the policies that ask no catalyst.
  for (const char* p : {"h2o", "tova", "nuc", "streaming", "swa", "truncate"})
    EXPECT_TRUE(test::fails_cleanly(nih({"--policy", std::string(p) + ":catalyst=general"}),
                                    {"--policy", p, "catalyst does not apply"}, 2, kQuick)) << p;
  EXPECT_TRUE(test::fails_cleanly(nih({"--policy", "full:cr_rope=0"}), {"--policy full: cr_rope does not apply"}, 2,
                                  kQuick));
  EXPECT_TRUE(test::fails_cleanly(nih({"-n", "0"}), {"-n"}, 2, kQuick));
  EXPECT_TRUE(test::fails_cleanly(nih({"--checkpoint-every", "-1"}), {"--checkpoint-every"}, 2, kQuick));
  // A checkpoint directory that cannot be made is refused before the model loads.
  EXPECT_TRUE(test::fails_cleanly(nih({"--checkpoint-dir", "/proc/no-such-dir"}), {"--checkpoint-dir", "cannot create"},
                                  std::nullopt, kQuick));
  EXPECT_TRUE(test::fails_cleanly(test::run_infinipot({"nih"}), {"-m"}, 2, kQuick));
}

// docs/results.md's ablation commands stay runnable: every --policy list there passes every
// check nih makes before the model loads (the run then stops at the unwritable --out), and
// the plot command's --ablation names configs the way the records spell them.
TEST(NihCli, DocumentedAblationCommandsAreAccepted) {
  test::TempDir dir;
  const std::string model = test::real_model_path();
  std::istringstream docs(read_all(std::string(INFINIPOT_TEST_SOURCE_DIR) + "/docs/results.md"));
  const std::string run = "build/infinipot nih -m $M $A --policy ";
  int lists = 0, ablation = 0;
  for (std::string line; std::getline(docs, line);) {
    if (line.rfind(run, 0) == 0) {
      const std::string list = line.substr(run.size());
      ++lists;
      EXPECT_TRUE(test::fails_cleanly(
          test::run_infinipot({"nih", "-m", model, "--pot", "1024", "--policy", list, "--out", dir.file("no/r.jsonl")}),
          {"cannot write the results file"}, 1, kQuick))
          << list;
    }
    const size_t at = line.find("--ablation ");
    if (at != std::string::npos && line.find("bench/plot_results.py") == std::string::npos) {
      std::stringstream configs(line.substr(at + 11));
      for (std::string c; std::getline(configs, c, ',');) {
        ++ablation;
        EXPECT_EQ(parse_policies(c, 0, 0).at(0).config(), c) << "not a config string as records write it";
      }
    }
  }
  EXPECT_GE(lists, 6) << "docs/results.md lost its ablation commands";
  EXPECT_GE(ablation, 5) << "docs/results.md lost its plot command";
}

TEST(NihCli, HaystackFilesThatCannotBeUsedAreNamed) {
  test::TempDir dir;
  const std::string model = test::real_model_path();
  const std::string empty = dir.file("empty.txt"), latin1 = dir.file("latin1.txt");
  std::ofstream(empty) << "  \n";
  std::ofstream(latin1) << "The caf\xe9 is open.\n";
  auto nih = [&](const std::string& spec) {
    return test::run_infinipot({"nih", "-m", model, "--haystack", spec, "--out", dir.file("o.jsonl")});
  };
  EXPECT_TRUE(test::fails_cleanly(nih("mine=" + dir.file("missing.txt")), {"missing.txt", "does not exist"}, 1, kQuick));
  EXPECT_TRUE(test::fails_cleanly(nih("mine=" + empty), {"mine", "no text"}, 1, kQuick));
  EXPECT_TRUE(test::fails_cleanly(nih("mine=" + latin1), {"latin1.txt", "not valid UTF-8", "offset 7"}, 1, kQuick));
  EXPECT_FALSE(std::filesystem::exists(dir.file("o.jsonl")));
}

// A run whose every trial ended in an error (here a pot too small to distill) measured
// nothing: exit 1 naming the file that says why and repeating the first error, with the
// error records written.
TEST(NihCli, ARunThatMeasuredNothingFails) {
  test::TempDir dir;
  const std::string out = dir.file("r.jsonl");
  const auto r = test::run_infinipot({"nih", "-m", test::real_model_path(), "--pot", "10", "--lengths", "512",
                                      "--depths", "0.5", "--trials", "2", "--haystacks", "passkey", "--out", out});
  EXPECT_TRUE(test::fails_cleanly(
      r, {"all 2 trials", "r.jsonl", "nothing was measured", "The first: refused: --pot 10 cannot hold", "use --pot"}, 1,
      120));
  std::ifstream in(out);
  std::string line;
  int records = 0;
  while (std::getline(in, line)) records += line.find("\"error\":\"refused: --pot 10") != std::string::npos;
  EXPECT_EQ(records, 2);
}

TEST(NihCli, TableOnlyReadsTheResultsFile) {
  test::TempDir dir;
  const std::string path = dir.file("r.jsonl");
  append_result(path, record("full", "passkey", 4096, 0.5, 0, true));
  append_result(path, record("full", "passkey", 4096, 0.5, 1, false));
  auto r = test::run_infinipot({"nih", "--table-only", "--out", path});
  ASSERT_TRUE(test::succeeded(r));
  EXPECT_NE(r.out.find("| full | 1/2 (50%) | 1/2 (50%) |"), std::string::npos) << r.out;
  r = test::run_infinipot({"nih", "--table-only", "--json", "--out", path});
  ASSERT_TRUE(test::succeeded(r));
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["haystacks"]["passkey"]["by_config"][0]["found"], 1);
  EXPECT_TRUE(test::fails_cleanly(test::run_infinipot({"nih", "--table-only", "--out", dir.file("none.jsonl")}),
                                  {"none.jsonl"}, 1, kQuick));
}

// Where a trial may start from another's pot (engine/prefix_forks.h): before the token at which
// their documents part, with more than the pot's capacity still to read in both, and only
// between trials with the same key; each later trial takes the furthest offer.
TEST(NihPrefixForks, LimitsAndOffers) {
  auto body = [](int n, int differ_at, int v) {
    std::vector<TokenId> b(n);
    for (int i = 0; i < n; ++i) b[i] = i < differ_at ? i % 50 : 1000 + v;
    return b;
  };
  // Run order: a (parts from the others at 900), b and c (part at 400 from each other), d (other key).
  PrefixForks f({{"k", body(2000, 900, 1)}, {"k", body(2000, 400, 2)}, {"k", body(1500, 400, 3)}, {"other", body(2000, 900, 4)}},
                100);
  EXPECT_EQ(f.limit(0, 1), 399) << "the token at the fork is shared too";
  EXPECT_EQ(f.limit(0, 2), 399);
  EXPECT_EQ(f.limit(1, 2), 399);
  EXPECT_EQ(f.limit(0, 3), -1) << "another key never shares";
  EXPECT_EQ(f.limit(1, 0), -1) << "only later trials start from an earlier one";
  PrefixForks tight({{"k", body(1000, 900, 1)}, {"k", body(950, 900, 2)}}, 100);
  EXPECT_EQ(tight.limit(0, 1), 950 - 100 - 1) << "more than the pot's capacity must be left to read";

  EXPECT_EQ(f.start(1), nullptr);
  EXPECT_EQ(f.start_body(1), 0);
  auto snap = [](int n) {
    auto s = std::make_shared<PotSnapshot>();
    s->stream_pos = n;
    return std::shared_ptr<const PotSnapshot>(s);
  };
  for (int done : {128, 256, 384, 512}) {
    EXPECT_EQ(f.wants(0, done), done <= 399) << done;
    if (f.wants(0, done)) f.offer(0, done, snap(done));
  }
  EXPECT_EQ(f.start_body(1), 384);
  EXPECT_EQ(f.start(1)->stream_pos, 384);
  EXPECT_EQ(f.start_body(2), 384);
  EXPECT_EQ(f.start(3), nullptr);
  // Trial 1 offers nothing further to 2 (it holds 384 already, the limit is 399) ...
  EXPECT_FALSE(f.wants(1, 384));
  EXPECT_TRUE(f.wants(1, 390));
  f.finished(1);
  EXPECT_EQ(f.start(1), nullptr) << "a finished trial's snapshot is released";
  EXPECT_EQ(f.start_body(2), 384);
  EXPECT_THROW(PrefixForks({}, 0), std::invalid_argument);
}

}  // namespace
}  // namespace infinipot::nih
