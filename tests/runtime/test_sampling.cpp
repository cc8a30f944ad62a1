// The host sampler: greedy is the first largest logit (NaN never wins), and sampling is
// reproducible from its seed and stays inside the top-k and top-p sets.
#include <cmath>
#include <set>
#include <stdexcept>
#include <vector>
#include <gtest/gtest.h>

#include "runtime/sampling.h"

namespace infinipot {
namespace {

TEST(Sampler, GreedyIsTheFirstLargestNonNaNLogit) {
  const float nan = std::nanf("");
  Sampler greedy(SamplerOptions{});
  EXPECT_TRUE(greedy.greedy());
  EXPECT_EQ(greedy.sample({0.5f, 2.0f, -1.0f, 2.0f}), 1);
  EXPECT_EQ(greedy.sample({nan, -3.0f, nan, -2.0f}), 3);
  EXPECT_EQ(Sampler::argmax({nan, nan}), 0);
  EXPECT_EQ(Sampler::argmax({-INFINITY, -INFINITY}), 0);
  EXPECT_EQ(Sampler::argmax({1.0f}), 0);
}

TEST(Sampler, SamplingFollowsTheSeedAndStaysInTheTopSets) {
  std::vector<float> logits(50);
  for (int i = 0; i < 50; ++i) logits[size_t(i)] = 0.1f * float(i % 17);  // ranks 16, 33 tie at the top
  SamplerOptions o;
  o.temperature = 1.0f;
  o.top_k = 3;
  o.top_p = 1.0f;
  o.seed = 42;
  Sampler a(o), b(o);
  EXPECT_FALSE(a.greedy());
  std::set<TokenId> seen;
  for (int i = 0; i < 200; ++i) {
    const TokenId t = a.sample(logits);
    EXPECT_EQ(t, b.sample(logits)) << "draw " << i;  // the same seed, the same draws
    seen.insert(t);
  }
  // top-k 3 of ties broken by the lower index: 16, 33 (1.6) and 15 (1.5).
  EXPECT_EQ(seen, (std::set<TokenId>{15, 16, 33}));
  o.top_k = 0;
  o.top_p = 0.01f;  // the smallest set reaching 1% of the mass: the first of the top logits
  Sampler nucleus(o);
  for (int i = 0; i < 20; ++i) EXPECT_EQ(nucleus.sample(logits), 16);
}

TEST(Sampler, BadOptionsAreRefused) {
  SamplerOptions o;
  o.top_p = 0.0f;
  EXPECT_THROW(Sampler{o}, std::invalid_argument);
  o.top_p = 0.9f;
  o.temperature = NAN;
  EXPECT_THROW(Sampler{o}, std::invalid_argument);
}

}  // namespace
}  // namespace infinipot
