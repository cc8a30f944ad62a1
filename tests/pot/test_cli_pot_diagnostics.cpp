// Diagnostics of `infinipot run` through the real binary: what the pot holds at the end
// (--pot-text), and where the question's attention goes (--pot-watch-attention).
#include <regex>
#include <set>
#include <string>

#include "tests/pot/cli_pot_fixture.h"

namespace infinipot {
namespace {

using namespace test_cli_pot;

// --pot-text shows what the pot holds: its entries' tokens in stream order with "[…N]" where N
// stream tokens were dropped. Streaming keeps 4 sinks and the newest text, so the text opens
// with the template's start, has one gap, and ends with the document's last words and the
// question; entries plus dropped tokens cover every token the pot read.
TEST_F(CliPot, PotTextShowsTheHeldEntriesAndTheGaps) {
  const json j = run_json({"-f", long_doc_, "-q", "Which bridge?", "--pot", "256", "--keep", "128", "-n", "4",
                           "--policy", "streaming", "--pot-text"});
  ASSERT_TRUE(j.contains("pot")) << last_.describe();
  ASSERT_TRUE(j["pot"].contains("held")) << last_.describe();
  const json& held = j["pot"]["held"];
  EXPECT_TRUE(held.at("shared").get<bool>()) << "streaming keeps the same entries everywhere";
  const std::string text = held.at("text").get<std::string>();
  const int entries = held.at("entries").get<int>();
  EXPECT_GT(entries, 128);
  EXPECT_LE(entries, 256);
  int dropped = 0, gaps = 0;
  const std::regex gap("\\[\u2026([0-9]+)\\]");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), gap); it != std::sregex_iterator(); ++it)
    dropped += std::stoi((*it)[1].str()), ++gaps;
  EXPECT_EQ(gaps, 1) << text;
  EXPECT_NE(text.find("people came to see it."), std::string::npos) << text;
  EXPECT_NE(text.find("Which bridge?"), std::string::npos) << text;
  EXPECT_EQ(text.find("1700"), std::string::npos) << "the document's first line was dropped: " << text;
  // Every prompt token and every answer token fed back (all but the last) was read once.
  EXPECT_EQ(entries + dropped, j.at("prompt_tokens").get<int>() + j.at("generated_tokens").get<int>() - 1) << text;
  // Without --json the same text goes to stderr.
  const auto plain = run({"-f", long_doc_, "-q", "Which bridge?", "--pot", "256", "--keep", "128", "-n", "4",
                          "--policy", "streaming", "--pot-text"});
  ASSERT_TRUE(succeeded(plain)) << plain.describe();
  EXPECT_NE(plain.err.find("the pot holds " + std::to_string(entries) + " entries"), std::string::npos) << plain.err;
  EXPECT_NE(plain.err.find(text), std::string::npos) << plain.err;
}

// A policy that chooses per layer (TOVA) leaves each layer its own text: `shared` is false and
// `per_layer` holds one text per layer, layer 0's being `text`. Every layer holds as many
// entries as layer 0, so in each the dropped tokens plus those entries cover every token read.
TEST_F(CliPot, PotTextGivesEachLayerItsOwnTextWhenLayersChooseApart) {
  const json j = run_json({"-f", long_doc_, "-q", "Which bridge?", "--pot", "256", "--keep", "128", "-n", "4",
                           "--policy", "tova", "--pot-text"});
  ASSERT_TRUE(j.contains("pot") && j["pot"].contains("held")) << last_.describe();
  const json& held = j["pot"]["held"];
  EXPECT_FALSE(held.at("shared").get<bool>()) << "TOVA scores each layer by its own attention";
  ASSERT_TRUE(held.contains("per_layer")) << held.dump();
  const json& layers = held["per_layer"];
  ASSERT_EQ(layers.size(), 30u) << "SmolLM2-135M has 30 layers";
  EXPECT_EQ(layers[0].get<std::string>(), held.at("text").get<std::string>());
  const int entries = held.at("entries").get<int>();
  const int read = j.at("prompt_tokens").get<int>() + j.at("generated_tokens").get<int>() - 1;
  const std::regex gap("\\[\u2026([0-9]+)\\]");
  std::set<std::string> distinct;
  for (const auto& layer : layers) {
    const std::string text = layer.get<std::string>();
    distinct.insert(text);
    int dropped = 0;
    for (auto it = std::sregex_iterator(text.begin(), text.end(), gap); it != std::sregex_iterator(); ++it)
      dropped += std::stoi((*it)[1].str());
    EXPECT_EQ(entries + dropped, read) << text;
  }
  EXPECT_GT(distinct.size(), 1u) << "the layers chose alike";
}

// --pot-watch-attention: the share of the question's attention (CaP's measure) that falls on
// the watched text once the document is read, per layer. Measuring leaves the pot as it was
// (the same answer and the same final pot, digest included); a policy without a catalyst
// reports null; without --pot-watch the flag is refused.
TEST_F(CliPot, WatchAttentionMeasuresWithoutChangingThePot) {
  // The document's last line: read after the last distillation, so the pot holds it whole.
  const std::vector<std::string> base = {"-f", long_doc_, "-q", "Which town painted its 43th bridge?", "--pot", "512",
                                         "-n", "6", "--pot-watch", "painted its 43th bridge"};
  const json plain = run_json(base);
  std::vector<std::string> args = base;
  args.push_back("--pot-watch-attention");
  const json measured = run_json(args);
  ASSERT_TRUE(plain.contains("pot") && measured.contains("pot")) << last_.describe();
  EXPECT_EQ(measured["pot"].at("digest"), plain["pot"].at("digest"));
  EXPECT_EQ(measured.at("text"), plain.at("text"));
  EXPECT_FALSE(plain["pot"]["watch"].contains("question_attention"));
  const json& qa = measured["pot"]["watch"].at("question_attention");
  ASSERT_TRUE(qa.is_object()) << measured["pot"]["watch"].dump();
  ASSERT_EQ(measured["pot"]["watch"].at("kept_fraction").get<double>(), 1.0) << measured["pot"]["watch"].dump();
  ASSERT_EQ(qa.at("share_per_layer").size(), 30u) << "SmolLM2-135M has 30 layers";
  double sum = 0;
  for (const auto& v : qa["share_per_layer"]) {
    EXPECT_GE(v.get<double>(), 0.0);
    EXPECT_LE(v.get<double>(), 1.0);
    sum += v.get<double>();
  }
  EXPECT_NEAR(qa.at("share").get<double>(), sum / 30, 1e-9);
  EXPECT_GT(qa.at("share").get<double>(), 0.0) << "the pot holds the watched text; the question gives it nothing";

  // The whole line around the watched words takes at least their share in every layer (the
  // same pot, the same attention, a superset of its entries).
  const std::string doc = long_document();
  const size_t at = doc.find("painted its 43th bridge"), from = doc.rfind('\n', at) + 1;
  std::vector<std::string> wide = base;
  wide[wide.size() - 1] = doc.substr(from, doc.find('\n', at) - from);
  wide.push_back("--pot-watch-attention");
  const json line = run_json(wide);
  ASSERT_TRUE(line.contains("pot")) << last_.describe();
  EXPECT_EQ(line["pot"].at("digest"), plain["pot"].at("digest"));
  const json& lqa = line["pot"]["watch"].at("question_attention");
  ASSERT_TRUE(lqa.is_object());
  for (size_t l = 0; l < 30; ++l)
    EXPECT_GE(lqa["share_per_layer"][l].get<double>(), qa["share_per_layer"][l].get<double>() - 1e-12) << "layer " << l;
  EXPECT_GT(lqa.at("share").get<double>(), qa.at("share").get<double>());

  const json streaming = run_json({"-f", long_doc_, "-q", "Which bridge?", "--pot", "256", "-n", "2", "--policy",
                                   "streaming", "--pot-watch", "bridge", "--pot-watch-attention"});
  ASSERT_TRUE(streaming.contains("pot")) << last_.describe();
  EXPECT_TRUE(streaming["pot"]["watch"].at("question_attention").is_null()) << "streaming runs no catalyst";

  const auto refused = run({"-f", long_doc_, "--pot", "256", "--pot-watch-attention"}, kQuick);
  EXPECT_TRUE(test::fails_cleanly(refused, {"--pot-watch-attention", "--pot-watch TEXT"}, 2, kQuick));
}

}  // namespace
}  // namespace infinipot
