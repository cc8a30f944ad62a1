// A decode row's transformer block in one launch (cl_kernels/decode_layer.cl, tuning
// decode_layer_launch): against a CPU reference of the block (ref::quantize_q8 + ref::matvec_q8
// for every product, as the native dot quantizes its inputs, ref::rope_store_kv,
// ref::attention, ref::swiglu), and against the five launches it replaces (bit for bit: the same
// functions on the same inputs), for Q4_0, Q4_1 and Q8_0 weights, in the device's own native dot
// form and in the AVX2 form. Shapes: a block and a lone 32-block past the last unit (160), three
// blocks and no unit (96), SmolLM2's (576, 1536), attention output narrower than the residual
// (64 against 96), a first token (an empty cache), f32 and f16 caches, attention split 1-4 ways,
// gate|up fused and separate. Like test_native_dot.cpp, it runs where the device has an
// 8-bit dot PoCL kernels may use (the only devices where the one-launch block exists: it runs
// every product in the native dot); elsewhere it asserts the path is off and skips.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <tuple>
#include <vector>
#include <gtest/gtest.h>

#include "runtime/cl_error.h"
#include "runtime/ops/decode_layer.h"
#include "tests/runtime/kernel_fixture.h"
#include "tests/support/compare.h"
#include "tests/support/cpu_ref.h"

namespace infinipot {
namespace {

using quant::TensorType;
using testing_support::all_close;
using testing_support::random_floats;
using testing_support::TestWeight;

struct BlockShape {
  int n_embd, n_ff, n_head, n_kv, head_dim, n_past, cap;
  bool kv_half, fused_gate_up;
};
const BlockShape kShapes[] = {
    {160, 96, 5, 1, 32, 37, 64, false, true},       // K: a unit and a lone block; 3 blocks, no unit
    {576, 1536, 9, 3, 64, 300, 512, true, true},     // SmolLM2
    {96, 224, 4, 2, 16, 0, 8, false, false},         // Wo 64 columns into a residual of 96; first token
    {64, 128, 2, 2, 32, 70, 96, true, false},        // GROUP 1
};

// The native dot's fixture with decode attention on the CPU kernel and the one-launch block on.
class DecodeLayer : public testing_support::NativeDotTest {
 protected:
  nlohmann::json extra_tuning() const override { return {{"attention_vec16", true}, {"decode_layer_launch", true}}; }
  std::vector<float> download_half(const cl::Buffer& b, size_t n) {
    std::vector<uint16_t> h(n);
    ctx().read(b, h.data(), n * 2);
    std::vector<float> f(n);
    for (size_t i = 0; i < n; ++i) f[i] = quant::fp16_to_fp32(h[i]);
    return f;
  }
};

// The cache rows a test starts from: random entries in slots < n_past, in the store's element type.
std::vector<uint16_t> to_halves(const std::vector<float>& v) {
  std::vector<uint16_t> h(v.size());
  for (size_t i = 0; i < v.size(); ++i) h[i] = quant::fp32_to_fp16(v[i]);
  return h;
}

double inv_rms(const std::vector<float>& x, float eps) {
  double ss = 0;
  for (float v : x) ss += double(v) * v;
  return 1.0 / std::sqrt(ss / x.size() + eps);
}

// y = W . quantize_q8(x) (the native dot's input), times `scale`; + add when given.
std::vector<float> q8_product(TensorType t, const TestWeight& W, int row0, int rows, const std::vector<float>& x,
                              double scale) {
  const std::vector<ref::Q8Block> xq = ref::quantize_q8(x.data(), 1, W.dev.cols);
  std::vector<float> y(rows);
  ref::matvec_q8(t, W.blocks.data() + size_t(row0) * W.dev.row_bytes, rows, W.dev.cols, xq.data(), 1, y.data(), rows,
                 false, nullptr);
  for (float& v : y) v = float(v * scale);
  return y;
}

// Each element within `rel` of the largest |value| of `want` (plus a floor): the products'
// 8-bit inputs may round one step apart where an earlier float differs in its last bit, which
// moves a sum by ~1/(127 sqrt(K)) of its size; a wrong row, head, angle or missing step moves
// it by its own size.
std::function<double(size_t)> scaled(const std::vector<float>& want, double rel) {
  double m = 0;
  for (float v : want) m = std::max(m, double(std::fabs(v)));
  return [m, rel](size_t) { return rel * m + 1e-6; };
}

TEST_P(DecodeLayer, MatchesTheCpuReferenceAndTheFiveLaunches) {
  const TensorType t = type();
  const float eps = 1e-5f, theta = 10000.f;
  uint32_t seed = 100;
  for (const BlockShape& b : kShapes) {
    const std::string what = std::string(quant::traits(t).name) + " n_embd=" + std::to_string(b.n_embd) +
                             " n_ff=" + std::to_string(b.n_ff) + " heads " + std::to_string(b.n_head) + "/" +
                             std::to_string(b.n_kv) + "x" + std::to_string(b.head_dim) +
                             " n_past=" + std::to_string(b.n_past) + (b.kv_half ? " f16" : " f32");
    SCOPED_TRACE(what);
    const int q_dim = b.n_head * b.head_dim, qkv_rows = (b.n_head + 2 * b.n_kv) * b.head_dim;
    auto wqkv = testing_support::make_weight(ctx(), t, qkv_rows, b.n_embd, ++seed);
    auto wo = testing_support::make_weight(ctx(), t, b.n_embd, q_dim, ++seed);
    auto wgu = testing_support::make_weight(ctx(), t, 2 * b.n_ff, b.n_embd, ++seed);
    auto wgate = testing_support::make_weight(ctx(), t, b.n_ff, b.n_embd, ++seed);
    auto wup = testing_support::make_weight(ctx(), t, b.n_ff, b.n_embd, ++seed);
    auto wd = testing_support::make_weight(ctx(), t, b.n_embd, b.n_ff, ++seed);
    const std::vector<float> x0 = random_floats(b.n_embd, ++seed);
    const std::vector<float> attn_nw = random_floats(b.n_embd, ++seed, 0.5f, 1.5f);
    const std::vector<float> ffn_nw = random_floats(b.n_embd, ++seed, 0.5f, 1.5f);
    const size_t cache_n = size_t(b.n_kv) * b.cap * b.head_dim;
    std::vector<float> k0 = random_floats(cache_n, ++seed), v0 = random_floats(cache_n, ++seed);
    if (b.kv_half)  // the reference reads what the store holds
      for (auto* c : {&k0, &v0})
        for (float& v : *c) v = quant::fp16_to_fp32(quant::fp32_to_fp16(v));
    const std::vector<int> pos = {b.n_past + 3};  // a position other than the slot, as after distillation
    const ops::AttentionShape shape{b.n_head, b.n_kv, b.head_dim, b.cap, b.kv_half};
    const TestWeight& gate = b.fused_gate_up ? wgu : wgate;
    const TestWeight& up = b.fused_gate_up ? wgu : wup;
    const int up_row0 = b.fused_gate_up ? b.n_ff : 0;
    const int splits = std::max(1, std::min(ops::decode_splits(ctx(), shape), (b.n_past + 16) / 16));

    // The device: the one launch, then the five on their own buffers.
    struct Run {
      cl::Buffer x, qkv, k, v, attn, lse, act, part;
    };
    auto make_run = [&] {
      Run r;
      r.x = upload(x0);
      r.qkv = upload(std::vector<float>(qkv_rows, 0.f));
      r.k = b.kv_half ? upload(to_halves(k0)) : upload(k0);
      r.v = b.kv_half ? upload(to_halves(v0)) : upload(v0);
      r.attn = upload(std::vector<float>(q_dim, 0.f));
      r.lse = upload(std::vector<float>(b.n_head, 0.f));
      r.act = upload(std::vector<float>(b.n_ff, 0.f));
      r.part = upload(std::vector<float>(ops::decode_split_part_bytes(shape, splits) / 4, 0.f));
      return r;
    };
    auto d_attn_nw = upload(attn_nw), d_ffn_nw = upload(ffn_nw), d_cs = upload(ops::rope_angles(pos, b.head_dim, theta));
    const ops::DecodeLayer L{&wqkv.dev, &wo.dev, &gate.dev, &up.dev, up_row0, b.n_ff, &wd.dev, &d_attn_nw, &d_ffn_nw,
                             eps, ops::Glu::Silu, b.head_dim, &d_cs};
    ASSERT_TRUE(ops::decode_layer_supported(ctx(), shape, L));
    Run one = make_run();
    auto sync = upload(std::vector<int>(ops::kDecodeLayerSyncInts, 0));
    ops::decode_layer(ctx(), shape, L, one.x, one.qkv, one.k, one.v, b.n_past, one.attn, one.lse, one.act,
                      {splits, &one.part}, sync);
    Run five = make_run();
    const ops::RopeKv rkv{b.n_head, b.n_kv, b.head_dim, b.head_dim, &d_cs, &five.k, &five.v, b.cap, b.n_past,
                          b.kv_half};
    ops::matvec_qkv_rope(ctx(), wqkv.dev, five.x, {&d_attn_nw, eps}, 1, five.qkv, rkv);
    ops::attention(ctx(), shape, five.qkv, qkv_rows, five.k, five.v, b.n_past, 1, five.attn, q_dim, five.lse,
                   {splits, &five.part});
    ops::matvec(ctx(), wo.dev, five.attn, 1, five.x, b.n_embd, true);
    ops::matvec_glu(ctx(), gate.dev, up.dev, up_row0, b.n_ff, ops::Glu::Silu, five.x, {&d_ffn_nw, eps}, 1, five.act);
    ops::matvec(ctx(), wd.dev, five.act, 1, five.x, b.n_embd, true);

    // The CPU reference of the block, every product's input quantized as the native dot's.
    std::vector<float> xn(b.n_embd);
    for (int i = 0; i < b.n_embd; ++i) xn[i] = x0[i] * attn_nw[i];
    std::vector<float> qkv = q8_product(t, wqkv, 0, qkv_rows, xn, inv_rms(x0, eps));
    std::vector<float> k_ref = k0, v_ref = v0;
    ref::rope_store_kv(qkv.data(), qkv_rows, b.n_head, b.n_kv, b.head_dim, b.head_dim, pos.data(), theta, k_ref.data(),
                       v_ref.data(), b.cap, b.n_past, 1);
    if (b.kv_half)  // the new key and value as the store holds them, which attention then reads
      for (auto* c : {&k_ref, &v_ref})
        for (float& v : *c) v = quant::fp16_to_fp32(quant::fp32_to_fp16(v));
    std::vector<float> attn(q_dim), lse(b.n_head);
    ref::attention({b.n_head, b.n_kv, b.head_dim, b.cap}, qkv.data(), qkv_rows, k_ref.data(), v_ref.data(), b.n_past,
                   1, attn.data(), q_dim, lse.data());
    std::vector<float> x1 = x0;
    const std::vector<float> o = q8_product(t, wo, 0, b.n_embd, attn, 1.0);
    for (int i = 0; i < b.n_embd; ++i) x1[i] += o[i];
    for (int i = 0; i < b.n_embd; ++i) xn[i] = x1[i] * ffn_nw[i];
    std::vector<float> gu = q8_product(t, gate, 0, b.n_ff, xn, inv_rms(x1, eps));
    const std::vector<float> u = q8_product(t, up, up_row0, b.n_ff, xn, inv_rms(x1, eps));
    gu.insert(gu.end(), u.begin(), u.end());
    std::vector<float> act(b.n_ff);
    ref::swiglu(gu.data(), 1, b.n_ff, act.data());
    std::vector<float> x2 = x1;
    const std::vector<float> dn = q8_product(t, wd, 0, b.n_embd, act, 1.0);
    for (int i = 0; i < b.n_embd; ++i) x2[i] += dn[i];
    std::vector<float> update(b.n_embd);  // what the block adds: the scale of its errors
    for (int i = 0; i < b.n_embd; ++i) update[i] = x2[i] - x0[i];

    auto cache = [&](const Run& r, bool keys) {
      const cl::Buffer& c = keys ? r.k : r.v;
      return b.kv_half ? download_half(c, cache_n) : download(c, cache_n);
    };
    const std::vector<float> got_x = download(one.x, b.n_embd);
    std::vector<float> got_update(b.n_embd);
    for (int i = 0; i < b.n_embd; ++i) got_update[i] = got_x[i] - x0[i];
    // f16 stores round each new key and value to half (2^-11 relative) before attention reads them.
    const double rel = b.kv_half ? 3e-3 : 2e-3;
    EXPECT_TRUE(all_close("q|k|v " + what, download(one.qkv, qkv_rows), qkv, scaled(qkv, rel)));
    EXPECT_TRUE(all_close("keys " + what, cache(one, true), k_ref, scaled(k_ref, rel)));
    EXPECT_TRUE(all_close("values " + what, cache(one, false), v_ref, scaled(v_ref, rel)));
    EXPECT_TRUE(all_close("attention " + what, download(one.attn, q_dim), attn, scaled(attn, rel)));
    EXPECT_TRUE(all_close("lse " + what, download(one.lse, b.n_head), lse, scaled(lse, rel)));
    EXPECT_TRUE(all_close("act " + what, download(one.act, b.n_ff), act, scaled(act, 2 * rel)));
    EXPECT_TRUE(all_close("x update " + what, got_update, update, scaled(update, 2 * rel)));

    // The five launches: the same bits everywhere.
    EXPECT_TRUE(all_close("x vs five launches " + what, got_x, download(five.x, b.n_embd), 0.0));
    EXPECT_TRUE(all_close("q|k|v vs five launches " + what, download(one.qkv, qkv_rows), download(five.qkv, qkv_rows), 0.0));
    EXPECT_TRUE(all_close("keys vs five launches " + what, cache(one, true), cache(five, true), 0.0));
    EXPECT_TRUE(all_close("values vs five launches " + what, cache(one, false), cache(five, false), 0.0));
    EXPECT_TRUE(all_close("attention vs five launches " + what, download(one.attn, q_dim), download(five.attn, q_dim), 0.0));
    EXPECT_TRUE(all_close("lse vs five launches " + what, download(one.lse, b.n_head), download(five.lse, b.n_head), 0.0));
    EXPECT_TRUE(all_close("act vs five launches " + what, download(one.act, b.n_ff), download(five.act, b.n_ff), 0.0));

    // The launch leaves its counters at zero for the next one.
    std::vector<int> left(ops::kDecodeLayerSyncInts);
    ctx().read(sync, left.data(), left.size() * sizeof(int));
    EXPECT_EQ(left, std::vector<int>(ops::kDecodeLayerSyncInts, 0));
  }
}

// Refused where it cannot run: a weight outside the native types, a head too wide for the
// group kernel, the tuning off; and decode_layer itself refuses such a launch.
TEST_P(DecodeLayer, RefusedWhereItCannotRun) {
  const TensorType t = type();
  auto wqkv = testing_support::make_weight(ctx(), t, 3 * 32, 64, 1);
  auto wo = testing_support::make_weight(ctx(), t, 64, 32, 2);
  auto wgu = testing_support::make_weight(ctx(), t, 64, 64, 3);
  auto wd = testing_support::make_weight(ctx(), t, 64, 32, 4);
  auto f16 = testing_support::make_weight(ctx(), TensorType::F16, 64, 32, 5);
  auto nw = upload(std::vector<float>(64, 1.f));
  auto cs = upload(ops::rope_angles({0}, 32, 10000.f));
  const ops::AttentionShape shape{1, 1, 32, 16, false};
  const ops::DecodeLayer ok{&wqkv.dev, &wo.dev, &wgu.dev, &wgu.dev, 32, 32, &wd.dev, &nw, &nw, 1e-5f,
                            ops::Glu::Silu, 32, &cs};
  EXPECT_TRUE(ops::decode_layer_supported(ctx(), shape, ok));
  ops::DecodeLayer other = ok;
  other.down = &f16.dev;
  EXPECT_FALSE(ops::decode_layer_supported(ctx(), shape, other)) << "an F16 down product has no native dot";
  const ops::AttentionShape wide{1, 1, 48, 16, false};
  EXPECT_FALSE(ops::decode_layer_supported(ctx(), wide, ok)) << "q|k|v is not 3 heads of 48";
  cl::ContextOptions co;
  co.tuning_overrides = {{"matvec_native_dot", {"avx512_vnni", "avx2"}},
                         {"matvec_native_types", {"Q4_0", "Q4_1", "Q8_0"}},
                         {"attention_vec16", true},
                         {"decode_layer_launch", false}};
  cl::Context off(co);
  auto wqkv2 = testing_support::make_weight(off, t, 3 * 32, 64, 1);
  ops::DecodeLayer in_off = ok;
  in_off.wqkv = &wqkv2.dev;
  EXPECT_FALSE(ops::decode_layer_supported(off, shape, in_off)) << "decode_layer_launch false";
  auto buf = upload(std::vector<float>(4096, 0.f));
  auto sync = upload(std::vector<int>(ops::kDecodeLayerSyncInts, 0));
  try {
    ops::decode_layer(ctx(), shape, other, buf, buf, buf, buf, 0, buf, buf, buf, {}, sync);
    ADD_FAILURE() << "decode_layer ran with an F16 weight";
  } catch (const cl::ClError& e) {
    EXPECT_NE(std::string(e.what()).find("decode_layer"), std::string::npos) << e.what();
  }
}

std::string param_name(const ::testing::TestParamInfo<std::tuple<TensorType, int>>& i) {
  return std::string(quant::traits(std::get<0>(i.param)).name) + (std::get<1>(i.param) == 2 ? "_avx2" : "_own");
}

INSTANTIATE_TEST_SUITE_P(Types, DecodeLayer,
                         ::testing::Combine(::testing::Values(TensorType::Q4_0, TensorType::Q4_1, TensorType::Q8_0),
                                            ::testing::Values(-1, 2)),
                         param_name);

}  // namespace
}  // namespace infinipot
