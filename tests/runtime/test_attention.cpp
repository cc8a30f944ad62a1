// attention.cl (causal GQA attention with log-sum-exp, attention mass) against the CPU
// references in tests/support/cpu_ref.h, including attention over a cache compacted by
// kv_gather the way the pot compacts it (kv_gather's own test is in test_kv_cache.cpp).
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>
#include <gtest/gtest.h>

#include "model_loader/quant.h"
#include "runtime/ops/attention.h"
#include "tests/runtime/kernel_fixture.h"
#include "tests/support/compare.h"
#include "tests/support/cpu_ref.h"

namespace infinipot {
namespace {

using testing_support::all_close;
using testing_support::random_floats;

// Attention: each output is a convex combination of values, so its error is at most
// max|v| times the relative error of the probabilities. Those come from the fp32 score
// (head_dim-term dot product, ~1e-6 absolute at |score| ~ 10), exp (<= 3 ulp) and the online
// rescaling; the reference works in double. We accept kAttnTol * max|v| on outputs,
// kAttnTol * (1 + |lse|) on log-sum-exps and kAttnTol * mass on attention mass (a sum of
// positive probabilities, each with that relative error): ~10x headroom, while a wrongly
// masked or missed key moves an output by ~max|v| / n_keys.
constexpr double kAttnTol = 1e-5;

struct Case {
  int n_heads, n_kv_heads, head_dim, n_past, n;
  float q_amp = 3.0f;  // queries uniform in [-q_amp, q_amp], keys in [-1, 1]: score std ~ q_amp / 3
  std::string name() const {
    return "heads=" + std::to_string(n_heads) + "/" + std::to_string(n_kv_heads) + " head_dim=" +
           std::to_string(head_dim) + " n_past=" + std::to_string(n_past) + " n=" + std::to_string(n) +
           (q_amp > 3.0f ? " peaked" : "");
  }
};

// GROUP 1 and 3, head_dim 64 and 16, a fresh cache and one with history, one row and a chunk,
// and peaked softmaxes (scores up to ~15, as trained models produce).
const Case kCases[] = {
    {2, 2, 16, 0, 1},  {2, 2, 64, 0, 7},   {6, 2, 64, 0, 7},        {6, 2, 64, 23, 1},     {3, 1, 16, 23, 7},
    {4, 4, 64, 40, 5}, {9, 3, 16, 11, 13}, {6, 2, 64, 23, 7, 12.0f}, {3, 1, 16, 40, 5, 12.0f},
    {4, 1, 256, 37, 9},  // a chunk of Gemma 3's 256-float heads
    // Decode rows: a long cache (many keys per item of a split), Gemma 3's 256-float heads (four
    // 64-float slices in the split's merge), a 20-float head (a slice of 5 float4s). Under vec16
    // a decode row takes a work-item per KV head where its query heads hold at most 256 floats
    // (the 64-float heads here), else one per query head (Gemma's 4 heads of 256).
    {9, 3, 64, 300, 1}, {4, 1, 256, 150, 1}, {2, 1, 20, 57, 1, 12.0f}, {16, 8, 64, 70, 1},
};

// A KV cache of `cap` slots per head with `used` valid entries; the slots past them hold NaN,
// so a kernel that reads past its causal limit poisons its output.
struct Cache {
  std::vector<float> k, v;
  Cache(int n_kv, int cap, int hd, int used, uint32_t seed) {
    k = random_floats(size_t(n_kv) * cap * hd, seed);
    v = random_floats(k.size(), seed + 1);
    for (int g = 0; g < n_kv; ++g)
      for (size_t e = (size_t(g) * cap + used) * hd; e < size_t(g + 1) * cap * hd; ++e)
        k[e] = v[e] = std::numeric_limits<float>::quiet_NaN();
  }
};

// q as the query part of fused q|k|v rows; scaled so the softmax is far from uniform.
std::vector<float> make_queries(const Case& c, int ldq, uint32_t seed) {
  return random_floats(size_t(c.n) * ldq, seed, -c.q_amp, c.q_amp);
}

// What a test builds from a case: the reference's and the device's shapes (room for 4 slots
// past the chunk), q|k|v and output row strides, a cache holding n_past + n entries (seed)
// and the queries (seed + 1).
struct CaseData {
  ref::AttnShape rs;
  ops::AttentionShape s;
  int ldq, ldo;
  Cache cache;
  std::vector<float> q;
  CaseData(const Case& c, uint32_t seed, int window = 0)  // window: a sliding one (0: none)
      : rs{c.n_heads, c.n_kv_heads, c.head_dim, c.n_past + c.n + 4, window},
        s{c.n_heads, c.n_kv_heads, c.head_dim, rs.cap},
        ldq((c.n_heads + 2 * c.n_kv_heads) * c.head_dim),
        ldo(c.n_heads * c.head_dim),
        cache(c.n_kv_heads, rs.cap, c.head_dim, c.n_past + c.n, seed),
        q(make_queries(c, ldq, seed + 1)) {
    s.window = window;
  }
};

// One ops::attention call of a case: uploads q and the store's keys and values (floats, or
// half bits for the fp16 store), runs over a chunk whose output starts as out0 ([n][ldo]:
// columns past the heads must survive; NaN elsewhere shows any output left unwritten) and
// downloads out and lse. The buffers stay for the attention-mass checks that reuse them.
struct AttentionRun {
  cl::Buffer d_q, d_k, d_v, d_out, d_lse;
  std::vector<float> out, lse;
  template <class KV>
  AttentionRun(cl::Context& cx, const ops::AttentionShape& s, const Case& c, const std::vector<float>& q, int ldq,
               const std::vector<KV>& k, const std::vector<KV>& v, const std::vector<float>& out0)
      : d_q(testing_support::upload(cx, q)),
        d_k(testing_support::upload(cx, k)),
        d_v(testing_support::upload(cx, v)),
        d_out(testing_support::upload(cx, out0)),
        d_lse(cx.memory().alloc(cl::MemCategory::Scratch, size_t(c.n) * c.n_heads * 4, "lse")) {
    const int ldo = static_cast<int>(out0.size() / c.n);
    ops::attention(cx, s, d_q, ldq, d_k, d_v, c.n_past, c.n, d_out, ldo, d_lse);
    out = testing_support::download(cx, d_out, out0.size());
    lse = testing_support::download(cx, d_lse, size_t(c.n) * c.n_heads);
  }
};

std::vector<float> unwritten(const Case& c, int ldo) {
  return std::vector<float>(size_t(c.n) * ldo, std::numeric_limits<float>::quiet_NaN());
}

// The attention mass of all of a chunk's rows from the device (into a zeroed buffer) against
// the reference over the keys k (the values the device's store holds, fp32 or rounded half).
void expect_mass_of_all_rows(const std::string& what, cl::Context& cx, const ops::AttentionShape& s,
                             const ref::AttnShape& rs, const Case& c, const std::vector<float>& q, int ldq,
                             const std::vector<float>& k, const cl::Buffer& d_q, const cl::Buffer& d_k,
                             const cl::Buffer& d_lse) {
  auto d_mass = testing_support::upload(cx, std::vector<float>(size_t(c.n_kv_heads) * rs.cap, 0.0f));
  ops::attention_mass(cx, s, d_q, ldq, d_k, c.n_past, 0, c.n, d_lse, d_mass, 0);
  std::vector<float> mass(size_t(c.n_kv_heads) * rs.cap, 0.0f);
  ref::attention_mass(rs, q.data(), ldq, k.data(), c.n_past, 0, c.n, mass.data());
  EXPECT_TRUE(all_close(what, testing_support::download(cx, d_mass, mass.size()), mass,
                        [&](size_t i) { return kAttnTol * (1 + mass[i]); }));
}

// Every attention variant, each in a context tuned to run it: the untiled kernel (1 row per
// work-item), the tiled one with the default tile and a small one whose tile boundaries fall
// inside the test cases, and vec16 (rows in vector lanes; its 16-key blocks end inside the
// cases too) with 4, 8 and 16 rows per work-item (the last work-item of a chunk holds fewer
// rows, and the rows of one work-item see different keys) and the default ("auto"); under
// vec16 the decode rows (n == 1) of heads a multiple of 16 wide take attention_decode_lanes or
// attention_decode_lanes_group.
std::vector<std::pair<std::string, std::unique_ptr<cl::Context>>> attention_variants() {
  std::vector<std::pair<std::string, std::unique_ptr<cl::Context>>> variants;
  variants.emplace_back("untiled", testing_support::context_with_tuning("\"attention_tile_rows\": 1"));
  variants.emplace_back("tiled 16x32", testing_support::context_with_tuning("\"attention_tile_rows\": 16"));
  variants.emplace_back("tiled 4x16", testing_support::context_with_tuning(
                                         "\"attention_tile_rows\": 4, \"attention_key_tile\": 16"));
  variants.emplace_back("vec16 auto", testing_support::context_with_tuning("\"attention_vec16\": true"));
  for (int rows : {4, 8, 16})
    variants.emplace_back("vec16 rows " + std::to_string(rows),
                          testing_support::context_with_tuning("\"attention_vec16\": true, \"attention_vec16_rows\": " +
                                                               std::to_string(rows)));
  // Decode rows (n == 1) split over 7 (not a power of two) and 64 items per KV head.
  variants.emplace_back("decode split 7", testing_support::context_with_tuning("\"attention_decode_split\": 7"));
  variants.emplace_back("decode split 64", testing_support::context_with_tuning("\"attention_decode_split\": 64"));
  return variants;
}

class AttentionKernel : public testing_support::KernelTest {};

TEST_F(AttentionKernel, AttentionMatchesReference) {
  auto variants = attention_variants();
  for (auto& [variant, context] : variants)
  for (const Case& c : kCases) {
    SCOPED_TRACE(variant);
    cl::Context& cx = *context;
    const ref::AttnShape rs{c.n_heads, c.n_kv_heads, c.head_dim, c.n_past + c.n + 4};
    const ops::AttentionShape s{c.n_heads, c.n_kv_heads, c.head_dim, rs.cap};
    const int ldq = (c.n_heads + 2 * c.n_kv_heads) * c.head_dim, ldo = c.n_heads * c.head_dim + 3;
    const Cache cache(c.n_kv_heads, rs.cap, c.head_dim, c.n_past + c.n, 700 + c.n_past);
    const std::vector<float> q = make_queries(c, ldq, 710 + c.head_dim);
    const std::vector<float> out0 = random_floats(size_t(c.n) * ldo, 720);  // padding columns must survive
    const AttentionRun run(cx, s, c, q, ldq, cache.k, cache.v, out0);

    std::vector<float> out = out0, lse(size_t(c.n) * c.n_heads);
    ref::attention(rs, q.data(), ldq, cache.k.data(), cache.v.data(), c.n_past, c.n, out.data(), ldo, lse.data());
    EXPECT_TRUE(all_close("attention out " + c.name(), run.out, out, [&](size_t i) {
      return int(i % ldo) < c.n_heads * c.head_dim ? kAttnTol : 0.0;  // max|v| <= 1
    }));
    EXPECT_TRUE(all_close("attention lse " + c.name(), run.lse, lse,
                          [&](size_t i) { return kAttnTol * (1 + std::fabs(lse[i])); }));
  }
}

// Sliding-window layers (Gemma's local layers): each row sees only the last `window` slots.
// Windows shorter than the history, than the chunk, and of one slot; every variant, so the
// tiled kernel's tiles start inside a window and hold keys some rows of the group must skip.
TEST_F(AttentionKernel, SlidingWindowMatchesReference) {
  auto variants = attention_variants();
  const Case cases[] = {{4, 1, 64, 40, 13, 12.0f}, {6, 2, 16, 0, 29}, {3, 1, 16, 23, 1}};
  for (auto& [variant, context] : variants)
    for (const Case& c : cases)
      for (int window : {1, 5, 17}) {
        SCOPED_TRACE(variant + " window " + std::to_string(window));
        cl::Context& cx = *context;
        const ref::AttnShape rs{c.n_heads, c.n_kv_heads, c.head_dim, c.n_past + c.n + 4, window};
        ops::AttentionShape s{c.n_heads, c.n_kv_heads, c.head_dim, rs.cap};
        s.window = window;
        const int ldq = (c.n_heads + 2 * c.n_kv_heads) * c.head_dim, ldo = c.n_heads * c.head_dim;
        const Cache cache(c.n_kv_heads, rs.cap, c.head_dim, c.n_past + c.n, 730 + c.n_past);
        const std::vector<float> q = make_queries(c, ldq, 740 + c.head_dim);
        const AttentionRun run(cx, s, c, q, ldq, cache.k, cache.v, unwritten(c, ldo));
        std::vector<float> out(size_t(c.n) * ldo), lse(size_t(c.n) * c.n_heads);
        ref::attention(rs, q.data(), ldq, cache.k.data(), cache.v.data(), c.n_past, c.n, out.data(), ldo, lse.data());
        EXPECT_TRUE(all_close("windowed attention out " + c.name(), run.out, out, kAttnTol));
        EXPECT_TRUE(all_close("windowed attention lse " + c.name(), run.lse, lse,
                              [&](size_t i) { return kAttnTol * (1 + std::fabs(lse[i])); }));
        // The mass of the window's rows lands only on the keys they see.
        expect_mass_of_all_rows("windowed attention mass " + c.name(), cx, s, rs, c, q, ldq, cache.k, run.d_q, run.d_k,
                                run.d_lse);
      }
}

// A decode row's attention split over several work-items per KV head (ops::DecodeSplit: the
// window's 16-key blocks shared out, the partial softmaxes merged by a second launch):
// 2, 3 and 7 items (7 more than some cases have blocks: the extra items see none), with and
// without a sliding window; run twice on the same scratch, since a launch must not depend on
// what the one before left there.
TEST_F(AttentionKernel, DecodeSplitMatchesReference) {
  auto cx_ptr = testing_support::context_with_tuning("\"attention_vec16\": true");
  cl::Context& cx = *cx_ptr;
  const Case cases[] = {{6, 2, 64, 23, 1}, {9, 3, 64, 300, 1, 12.0f}, {16, 8, 64, 70, 1}, {2, 2, 16, 40, 1}};
  for (const Case& c : cases)
    for (int window : {0, 24})
      for (int splits : {2, 3, 7}) {
        SCOPED_TRACE(c.name() + " window " + std::to_string(window) + " splits " + std::to_string(splits));
        const CaseData d(c, 860 + c.n_past, window);
        const auto& [rs, s, ldq, ldo, cache, q] = d;
        std::vector<float> ref_out(static_cast<size_t>(ldo)), ref_lse(static_cast<size_t>(c.n_heads));
        ref::attention(rs, q.data(), ldq, cache.k.data(), cache.v.data(), c.n_past, 1, ref_out.data(), ldo,
                       ref_lse.data());
        cl::Buffer d_q = testing_support::upload(cx, q), d_k = testing_support::upload(cx, cache.k),
                   d_v = testing_support::upload(cx, cache.v);
        cl::Buffer part = cx.memory().alloc(cl::MemCategory::Scratch, ops::decode_split_part_bytes(s, splits), "part");
        for (int run = 0; run < 2; ++run) {
          cl::Buffer d_out = testing_support::upload(cx, unwritten(c, ldo));
          cl::Buffer d_lse = cx.memory().alloc(cl::MemCategory::Scratch, size_t(c.n_heads) * 4, "lse");
          ops::attention(cx, s, d_q, ldq, d_k, d_v, c.n_past, 1, d_out, ldo, d_lse, {splits, &part});
          EXPECT_TRUE(all_close("split decode out, run " + std::to_string(run),
                                testing_support::download(cx, d_out, size_t(ldo)), ref_out, kAttnTol));
          EXPECT_TRUE(all_close("split decode lse, run " + std::to_string(run),
                                testing_support::download(cx, d_lse, size_t(c.n_heads)), ref_lse,
                                [&](size_t i) { return kAttnTol * (1 + std::fabs(ref_lse[i])); }));
        }
        cl::Buffer d_out = testing_support::upload(cx, unwritten(c, ldo));
        EXPECT_THROW(ops::attention(cx, s, d_q, ldq, d_k, d_v, c.n_past, 1, d_out, ldo, d_out, {splits}),
                     cl::ClError)
            << "a split without scratch is refused";
      }
}

// vec16 keeps a row's sums whatever work-item holds it (key blocks start on multiples of 16
// from slot 0, attention.cl): 4, 8 and 16 rows per item give the same bits, in a chunk whose
// items end at different rows, with and without a sliding window.
TEST_F(AttentionKernel, Vec16RowsPerItemChangeNoBit) {
  const Case c{6, 2, 64, 37, 29, 12.0f};
  for (int window : {0, 21}) {
    SCOPED_TRACE("window " + std::to_string(window));
    const ref::AttnShape rs{c.n_heads, c.n_kv_heads, c.head_dim, c.n_past + c.n + 4, window};
    ops::AttentionShape s{c.n_heads, c.n_kv_heads, c.head_dim, rs.cap};
    s.window = window;
    const int ldq = (c.n_heads + 2 * c.n_kv_heads) * c.head_dim, ldo = c.n_heads * c.head_dim;
    const Cache cache(c.n_kv_heads, rs.cap, c.head_dim, c.n_past + c.n, 770);
    const std::vector<float> q = make_queries(c, ldq, 780);
    std::vector<std::vector<float>> outs, lses;
    for (int rows : {4, 8, 16}) {
      auto cx = testing_support::context_with_tuning("\"attention_vec16\": true, \"attention_vec16_rows\": " +
                                                     std::to_string(rows));
      const AttentionRun run(*cx, s, c, q, ldq, cache.k, cache.v, unwritten(c, ldo));
      outs.push_back(run.out);
      lses.push_back(run.lse);
    }
    for (size_t v = 1; v < outs.size(); ++v) {
      EXPECT_EQ(0, std::memcmp(outs[v].data(), outs[0].data(), outs[0].size() * sizeof(float))) << "rows variant " << v;
      EXPECT_EQ(0, std::memcmp(lses[v].data(), lses[0].data(), lses[0].size() * sizeof(float))) << "rows variant " << v;
    }
  }
}

// The fp16 KV store (--kv-type f16): every variant reads half keys and values (vload_half*),
// against the reference on the same values rounded to half. A variant that read the half
// store as floats would see garbage, not a near miss.
TEST_F(AttentionKernel, HalfStoreMatchesReference) {
  auto variants = attention_variants();
  const Case cases[] = {{6, 2, 64, 23, 7, 12.0f}, {3, 1, 16, 40, 5}, {4, 1, 64, 0, 19}};
  for (auto& [variant, context] : variants)
    for (const Case& c : cases) {
      SCOPED_TRACE(variant);
      cl::Context& cx = *context;
      const ref::AttnShape rs{c.n_heads, c.n_kv_heads, c.head_dim, c.n_past + c.n + 4};
      ops::AttentionShape s{c.n_heads, c.n_kv_heads, c.head_dim, rs.cap};
      s.kv_half = true;
      const int ldq = (c.n_heads + 2 * c.n_kv_heads) * c.head_dim, ldo = c.n_heads * c.head_dim;
      Cache cache(c.n_kv_heads, rs.cap, c.head_dim, c.n_past + c.n, 750 + c.n_past);
      std::vector<uint16_t> k16(cache.k.size()), v16(cache.v.size());
      for (size_t e = 0; e < k16.size(); ++e) {
        k16[e] = quant::fp32_to_fp16(cache.k[e]);
        v16[e] = quant::fp32_to_fp16(cache.v[e]);
        cache.k[e] = quant::fp16_to_fp32(k16[e]);  // the reference sees what the store holds
        cache.v[e] = quant::fp16_to_fp32(v16[e]);
      }
      const std::vector<float> q = make_queries(c, ldq, 760 + c.head_dim);
      const AttentionRun run(cx, s, c, q, ldq, k16, v16, unwritten(c, ldo));
      std::vector<float> out(size_t(c.n) * ldo), lse(size_t(c.n) * c.n_heads);
      ref::attention(rs, q.data(), ldq, cache.k.data(), cache.v.data(), c.n_past, c.n, out.data(), ldo, lse.data());
      EXPECT_TRUE(all_close("half-store attention out " + c.name(), run.out, out, kAttnTol));
      EXPECT_TRUE(all_close("half-store attention lse " + c.name(), run.lse, lse,
                            [&](size_t i) { return kAttnTol * (1 + std::fabs(lse[i])); }));
      // The mass kernels read the half keys too (the per-entry one under the work-group variants'
      // tuning, attention_mass_vec16 under vec16's).
      expect_mass_of_all_rows("half-store attention mass " + c.name(), cx, s, rs, c, q, ldq, cache.k, run.d_q, run.d_k,
                              run.d_lse);
    }
}

// Both mass kernels: one work-item per entry (GPUs) and attention_mass_vec16 (16 entries per
// work-item, CPU devices), each against the reference, and against each other to within the
// exps' rounding (the vec16 kernel repeats the per-entry kernel's arithmetic lane by lane; the
// pot's selections, and so the evaluation's records, must not depend on which one ran).
TEST_F(AttentionKernel, AttentionMassMatchesReference) {
  std::vector<std::pair<std::string, std::unique_ptr<cl::Context>>> kernels;
  kernels.emplace_back("per entry", testing_support::context_with_tuning("\"attention_vec16\": false"));
  kernels.emplace_back("vec16", testing_support::context_with_tuning("\"attention_vec16\": true"));
  for (const Case& c : kCases) {
    const ref::AttnShape rs{c.n_heads, c.n_kv_heads, c.head_dim, c.n_past + c.n + 4};
    const ops::AttentionShape s{c.n_heads, c.n_kv_heads, c.head_dim, rs.cap};
    const int ldq = (c.n_heads + 2 * c.n_kv_heads) * c.head_dim, ldo = c.n_heads * c.head_dim;
    const Cache cache(c.n_kv_heads, rs.cap, c.head_dim, c.n_past + c.n, 800 + c.n_past);
    const std::vector<float> q = make_queries(c, ldq, 810 + c.head_dim);
    std::vector<float> out(size_t(c.n) * ldo), lse(size_t(c.n) * c.n_heads);  // the lse the mass reads
    ref::attention(rs, q.data(), ldq, cache.k.data(), cache.v.data(), c.n_past, c.n, out.data(), ldo, lse.data());
    // All rows, then a window of rows [r0, r1) as the pot scores the tail of a chunk; the mass
    // is accumulated from a float offset into a buffer that already holds earlier scores.
    const int r0 = c.n > 2 ? 2 : 0, r1 = c.n > 4 ? c.n - 1 : c.n;
    for (auto [a, b] : {std::pair{0, c.n}, std::pair{r0, r1}}) {
      const size_t off = 5;
      const std::vector<float> mass0 = random_floats(off + size_t(c.n_kv_heads) * rs.cap, 820 + a, 0.0f, 2.0f);
      std::vector<float> expect = mass0;
      ref::attention_mass(rs, q.data(), ldq, cache.k.data(), c.n_past, a, b, expect.data() + off);
      // Sanity of the reference itself: each (row, head) distributes a total mass of 1.
      double added = 0;
      for (size_t e = off; e < expect.size(); ++e) added += double(expect[e]) - mass0[e];
      EXPECT_NEAR(added, double(b - a) * c.n_heads, 1e-4 * (b - a) * c.n_heads);

      std::vector<std::vector<float>> got;
      for (auto& [kernel, context] : kernels) {
        cl::Context& cx = *context;
        auto d_q = testing_support::upload(cx, q);
        auto d_k = testing_support::upload(cx, cache.k);
        auto d_lse = testing_support::upload(cx, lse);  // the same log-sum-exps for both kernels
        auto d_mass = testing_support::upload(cx, mass0);
        ops::attention_mass(cx, s, d_q, ldq, d_k, c.n_past, a, b, d_lse, d_mass, off);
        got.push_back(testing_support::download(cx, d_mass, mass0.size()));
        EXPECT_TRUE(all_close("attention_mass (" + kernel + ") rows " + std::to_string(a) + ".." + std::to_string(b) +
                                  " " + c.name(),
                              got.back(), expect, [&](size_t i) {
                                if (i < off || int((i - off) % rs.cap) >= c.n_past + b) return 0.0;  // untouched
                                return kAttnTol * std::fabs(expect[i]);
                              }));
      }
      // Bit for bit but for the exps: the vec16 kernel calls the driver's vector exp, the
      // per-entry kernel its scalar one, which PoCL 3.1 rounds differently on rare inputs (one
      // entry of one case here, by 1 ulp). 2 ulps of the total allow that and nothing else.
      for (size_t i = 0; i < got[0].size(); ++i) {
        const float ulps2 = 2 * FLT_EPSILON * std::max(std::fabs(got[0][i]), std::fabs(got[1][i]));
        EXPECT_LE(std::fabs(got[0][i] - got[1][i]), ulps2)
            << "the two mass kernels differ at " << i << ": rows " << a << ".." << b << " " << c.name();
      }
    }
  }
}

// Launches far larger than the cases above, whose work-items keep kilobytes of private
// arrays: a chunk of 1,024 rows with Gemma 3's 256-float heads (`--chunk` up to 64K) and the
// attention mass over a 16K-entry cache (SnapKV's one selection over a whole input). Left to
// choose, PoCL made each launch one work-group on one thread's 8 MiB stack, and both crashed
// the process (runtime/ops/attention.cpp, attention_group). Rows are checked against the reference at
// the chunk's ends and middle, so the check costs a few rows of reference, not the whole chunk.
TEST_F(AttentionKernel, BigChunksAndLongCachesRunAndMatchTheReference) {
  std::vector<std::pair<std::string, std::unique_ptr<cl::Context>>> variants;
  variants.emplace_back("untiled", testing_support::context_with_tuning("\"attention_tile_rows\": 1"));
  variants.emplace_back("vec16", testing_support::context_with_tuning("\"attention_vec16\": true"));
  // Under INFINIPOT_TEST_SMALL a chunk of 48 rows and a 700-entry cache: the same launches.
  const int big_n = testing_support::full_or_small(1024, 48), long_n = testing_support::full_or_small(16400, 700);
  const Case big{8, 1, 256, 0, big_n}, long_cache{9, 3, 64, long_n, 4}, long_decode{9, 3, 64, long_n, 1};
  for (auto& [variant, context] : variants) {
    SCOPED_TRACE(variant);
    cl::Context& cx = *context;
    {  // the big chunk
      const Case& c = big;
      const CaseData u(c, 830);
      const auto& [rs, s, ldq, ldo, cache, q] = u;
      const AttentionRun run(cx, s, c, q, ldq, cache.k, cache.v, unwritten(c, ldo));
      for (int i : {0, 1, 15, 16, big_n / 2 - 1, big_n - 2, big_n - 1}) {
        std::vector<float> out(ldo), lse(c.n_heads);
        ref::attention(rs, q.data() + size_t(i) * ldq, ldq, cache.k.data(), cache.v.data(), c.n_past + i, 1, out.data(),
                       ldo, lse.data());
        const std::string row = "big chunk row " + std::to_string(i) + " " + c.name();
        EXPECT_TRUE(all_close(row + " out", {run.out.begin() + size_t(i) * ldo, run.out.begin() + size_t(i + 1) * ldo},
                              out, kAttnTol));
        EXPECT_TRUE(all_close(row + " lse",
                              {run.lse.begin() + size_t(i) * c.n_heads, run.lse.begin() + size_t(i + 1) * c.n_heads},
                              lse, [&](size_t h) { return kAttnTol * (1 + std::fabs(lse[h])); }));
      }
    }
    // A few rows over a long cache, and one decode row (attention_decode_lanes under vec16);
    // then the rows' mass, with the reference's log-sum-exps.
    for (const Case& c : {long_cache, long_decode}) {
      const CaseData u(c, 840);
      const auto& [rs, s, ldq, ldo, cache, q] = u;
      std::vector<float> out(size_t(c.n) * ldo), lse(size_t(c.n) * c.n_heads);
      ref::attention(rs, q.data(), ldq, cache.k.data(), cache.v.data(), c.n_past, c.n, out.data(), ldo, lse.data());
      const AttentionRun run(cx, s, c, q, ldq, cache.k, cache.v, unwritten(c, ldo));
      EXPECT_TRUE(all_close("long cache out " + c.name(), run.out, out, kAttnTol));
      EXPECT_TRUE(all_close("long cache lse " + c.name(), run.lse, lse,
                            [&](size_t h) { return kAttnTol * (1 + std::fabs(lse[h])); }));
      auto d_lse = testing_support::upload(cx, lse);
      auto d_mass = testing_support::upload(cx, std::vector<float>(size_t(c.n_kv_heads) * rs.cap, 0.0f));
      ops::attention_mass(cx, s, run.d_q, ldq, run.d_k, c.n_past, 0, c.n, d_lse, d_mass, 0);
      std::vector<float> mass(size_t(c.n_kv_heads) * rs.cap, 0.0f);
      ref::attention_mass(rs, q.data(), ldq, cache.k.data(), c.n_past, 0, c.n, mass.data());
      EXPECT_TRUE(all_close("long cache mass " + c.name(), testing_support::download(cx, d_mass, mass.size()), mass,
                            [&](size_t i) { return kAttnTol * (1 + mass[i]); }));
    }
  }
}

// The pot's compaction: a chunk in the cache, a different subset of entries kept per KV head,
// gathered to the front of a fresh cache, the next chunk after them, and attention over the
// result. The caches are filled from the CPU reference (ref::rope_store_kv: RoPE'd keys and
// values at the slots and positions the forward pass would give them) and uploaded as they are,
// so only kv_gather and attention run on the device. The next chunk is put into the fresh cache
// before the gather: kv_gather must leave every slot >= n_keep alone. The device pipeline must
// match reference attention over the gathered reference cache.
TEST_F(AttentionKernel, AttentionOverGatheredCacheMatchesReference) {
  for (int head_dim : {16, 64}) {
    const int n_heads = 6, n_kv = 2, cap = 40, n1 = 30, n_keep = 12, n2 = 5;
    const float theta = 10000.0f;
    const ref::AttnShape rs{n_heads, n_kv, head_dim, cap};
    const ops::AttentionShape s{n_heads, n_kv, head_dim, cap};
    const int k0 = n_heads * head_dim, ld = k0 + 2 * n_kv * head_dim;
    std::vector<float> chunk1 = random_floats(size_t(n1) * ld, 900 + head_dim, -2.0f, 2.0f);
    std::vector<float> chunk2 = random_floats(size_t(n2) * ld, 901 + head_dim, -2.0f, 2.0f);
    std::vector<int> keep(size_t(n_kv) * n_keep);
    for (int j = 0; j < n_keep; ++j) {
      keep[j] = j * 2 + 1;                     // head 0: every other entry
      keep[n_keep + j] = j < 4 ? j : 14 + j;   // head 1: the first 4 (sinks) and a recent window
    }
    std::vector<int> pos1(n1), pos2(n2);       // chunk 2 continues the stream's positions
    for (int t = 0; t < n1; ++t) pos1[t] = t;
    for (int t = 0; t < n2; ++t) pos2[t] = n1 + t;

    std::vector<float> k(size_t(n_kv) * cap * head_dim, 0.0f), v(k.size(), 0.0f);
    std::vector<float> gk(k.size(), 0.0f), gv(k.size(), 0.0f);
    ref::rope_store_kv(chunk1.data(), ld, n_heads, n_kv, head_dim, head_dim, pos1.data(), theta, k.data(), v.data(),
                       cap, 0, n1);
    ref::rope_store_kv(chunk2.data(), ld, n_heads, n_kv, head_dim, head_dim, pos2.data(), theta, gk.data(),
                       gv.data(), cap, n_keep, n2);  // chunk2's q heads are rotated too: the queries
    auto d_chunk2 = upload(chunk2), d_keep = upload(keep);
    auto d_k = upload(k), d_v = upload(v), d_gk = upload(gk), d_gv = upload(gv);
    ops::kv_gather(ctx(), d_k, d_gk, n_kv, cap, head_dim, d_keep, n_keep);
    ops::kv_gather(ctx(), d_v, d_gv, n_kv, cap, head_dim, d_keep, n_keep);
    auto d_out = ctx().memory().alloc(cl::MemCategory::Scratch, size_t(n2) * k0 * 4, "out");
    auto d_lse = ctx().memory().alloc(cl::MemCategory::Scratch, size_t(n2) * n_heads * 4, "lse");
    ops::attention(ctx(), s, d_chunk2, ld, d_gk, d_gv, n_keep, n2, d_out, k0, d_lse);

    ref::kv_gather(k.data(), gk.data(), n_kv, cap, head_dim, keep.data(), n_keep);
    ref::kv_gather(v.data(), gv.data(), n_kv, cap, head_dim, keep.data(), n_keep);
    EXPECT_TRUE(all_close("gathered keys", download_all(d_gk), gk, 0.0));
    EXPECT_TRUE(all_close("gathered values", download_all(d_gv), gv, 0.0));
    std::vector<float> out(size_t(n2) * k0), lse(size_t(n2) * n_heads);
    ref::attention(rs, chunk2.data(), ld, gk.data(), gv.data(), n_keep, n2, out.data(), k0, lse.data());
    const std::string name = " over a gathered cache, head_dim=" + std::to_string(head_dim);
    EXPECT_TRUE(all_close("attention out" + name, download_all(d_out), out, kAttnTol * 2.0));  // max|v| <= 2
    EXPECT_TRUE(all_close("attention lse" + name, download_all(d_lse), lse,
                          [&](size_t i) { return kAttnTol * (1 + std::fabs(lse[i])); }));
  }
}

// The tiled kernel's keys and values (2 * tile * head_dim floats) must fit the device's local
// memory: a tuned tile that does not is made smaller, in steps of 16, or the untiled kernel
// runs (0). Oclgrind (32 KiB, as many mobile GPUs) refused the 64 KiB of head_dim 256 at 32.
TEST(AttentionKeyTile, ShrinksToTheDevicesLocalMemory) {
  EXPECT_EQ(ops::attention_key_tile(32, 64, 32 << 10), 32);    // 16 KiB: fits
  EXPECT_EQ(ops::attention_key_tile(32, 128, 32 << 10), 32);   // 32 KiB: fits exactly
  EXPECT_EQ(ops::attention_key_tile(32, 256, 32 << 10), 16);   // 64 KiB -> 32 KiB
  EXPECT_EQ(ops::attention_key_tile(32, 256, 48 << 10), 16);   // NVIDIA's 48 KiB: 16 (32 KiB)
  EXPECT_EQ(ops::attention_key_tile(64, 256, 64 << 10), 32);
  EXPECT_EQ(ops::attention_key_tile(32, 256, 16 << 10), 0);    // not even 16: untiled
  EXPECT_EQ(ops::attention_key_tile(48, 64, 2 << 20), 48);     // PoCL's 2 MiB: as tuned
}

}  // namespace
}  // namespace infinipot
