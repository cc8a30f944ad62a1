// Launchers for norm.cl, rope.cl, elementwise.cl, kv_cache.cl, attention.cl, cross_entropy.cl,
// argmax.cl.
#include <cmath>
#include <string>

#include "runtime/cl_error.h"
#include "runtime/ops.h"

namespace infinipot::ops {
namespace {
std::string kv_option(bool kv_half) { return kv_half ? "-DKV_HALF" : ""; }
}  // namespace
static int norm_local(Context& c) {
  const int local = c.tuning().norm_local;
  return local < 1 || (local & (local - 1)) ? 1 : local;
}

void rms_norm(Context& c, const Buffer& x, const Buffer& w, Buffer& out, int n_rows, int n, float eps) {
  const int local = norm_local(c);
  c.kernel({"rms_norm", {local}}, "norm.cl", "rms_norm", [&] { return "-DLOCAL=" + std::to_string(local); })
      .args(x, w, out, n, eps)
      .launch(c.queue(), {size_t(n_rows) * local}, {size_t(local)});
}

void rms_norm_add(Context& c, const Buffer& x, const Buffer& w, Buffer& out, int n_rows, int n, float eps) {
  if (&x == &out) throw cl::ClError("invalid launch: rms_norm_add needs distinct input and output");
  const int local = norm_local(c);
  c.kernel("norm.cl", "rms_norm", "-DLOCAL=" + std::to_string(local) + " -DACCUM")
      .args(x, w, out, n, eps)
      .launch(c.queue(), {size_t(n_rows) * local}, {size_t(local)});
}

void rms_norm_heads(Context& c, Buffer& x, int ld, int off, int n_heads, int head_dim, int n_tokens, const Buffer& w,
                    float eps) {
  if (off < 0 || off + n_heads * head_dim > ld || x.bytes() < size_t(n_tokens) * ld * 4 ||
      w.bytes() < size_t(head_dim) * 4)
    throw cl::ClError("invalid launch: rms_norm_heads heads outside the rows or weight too short");
  const int local = norm_local(c);
  c.kernel("norm.cl", "rms_norm_heads", "-DLOCAL=" + std::to_string(local))
      .args(x, ld, off, n_heads, w, head_dim, eps)
      .launch(c.queue(), {size_t(n_tokens) * n_heads * local}, {size_t(local)});
}

void rope_store_kv(Context& c, Buffer& qkv, int ld, int n_head, int n_kv_heads, int head_dim, int n_rot,
                   const Buffer& cs, Buffer& k_cache, Buffer& v_cache, int cap, int slot0, int n_tokens,
                   bool kv_half) {
  if (slot0 < 0 || slot0 + n_tokens > cap)
    throw cl::ClError("invalid launch: rope_store_kv slots " + std::to_string(slot0) + ".." +
                      std::to_string(slot0 + n_tokens) + " exceed capacity " + std::to_string(cap));
  if (head_dim % 2 || n_rot > head_dim) throw cl::ClError("invalid launch: rope_store_kv head_dim/n_rot");
  if (cs.bytes() < size_t(n_tokens) * n_rot * sizeof(float))
    throw cl::ClError("invalid launch: rope_store_kv angle table too small");
  const int v0 = (n_head + n_kv_heads) * head_dim;
  c.kernel("kv_format.cl+rope.cl", "rope_store_kv", kv_option(kv_half))
      .args(qkv, ld, head_dim, n_rot, cs, n_head, v0, k_cache, v_cache, cap, slot0)
      .launch(c.queue(), {size_t(head_dim / 2), size_t(n_head + n_kv_heads), size_t(n_tokens)});
}

namespace {
void fill_rope_angles(const int* pos, size_t n, int n_rot, float theta, const std::vector<float>& freq_factors,
                      float* cs) {
  if (!freq_factors.empty() && freq_factors.size() != size_t(n_rot / 2))
    throw cl::ClError("rope_angles: freq_factors must hold n_rot/2 entries");
  for (size_t t = 0; t < n; ++t)
    for (int i = 0; i < n_rot / 2; ++i) {
      // Double precision: the angle of a large position must not lose its fraction.
      double a = pos[t] * std::pow(double(theta), -2.0 * i / n_rot);
      if (!freq_factors.empty()) a /= freq_factors[size_t(i)];
      cs[t * n_rot + 2 * i] = static_cast<float>(std::cos(a));
      cs[t * n_rot + 2 * i + 1] = static_cast<float>(std::sin(a));
    }
}
}  // namespace

std::vector<float> rope_angles(const std::vector<int>& pos, int n_rot, float theta,
                               const std::vector<float>& freq_factors) {
  std::vector<float> cs(pos.size() * n_rot);
  fill_rope_angles(pos.data(), pos.size(), n_rot, theta, freq_factors, cs.data());
  return cs;
}

void rope_angles(int first, int n, int n_rot, float theta, const std::vector<float>& freq_factors,
                 std::vector<float>& cs) {
  cs.resize(size_t(n) * n_rot);
  for (int t = 0; t < n; ++t) {
    const int p = first + t;
    fill_rope_angles(&p, 1, n_rot, theta, freq_factors, cs.data() + size_t(t) * n_rot);
  }
}

size_t rope_shift_table_bytes(int n_heads, int cap, int n_rot) { return size_t(n_heads) * cap * (n_rot / 2) * 8; }

// Slots per work-item of rope_shift_angles (rope.cl says why it loops).
constexpr int kRopeShiftSlots = 16;

void rope_shift_angles(Context& c, const Buffer& delta, int n_heads, int cap, int n_rot, int n_slots, float theta,
                       const Buffer& freq_factors, Buffer& table) {
  if (table.bytes() < rope_shift_table_bytes(n_heads, cap, n_rot)) throw cl::ClError("invalid launch: rope_shift table too small");
  if (freq_factors.bytes() < size_t(n_rot / 2) * sizeof(float))
    throw cl::ClError("invalid launch: rope_shift_angles freq_factors smaller than n_rot/2 floats");
  c.kernel("kv_format.cl+rope.cl", "rope_shift_angles")
      .args(delta, cap, n_rot, n_slots, kRopeShiftSlots, theta, freq_factors, table)
      .launch(c.queue(), {size_t(n_rot / 2), size_t((n_slots + kRopeShiftSlots - 1) / kRopeShiftSlots), size_t(n_heads)});
}

void rope_shift(Context& c, Buffer& k_cache, int n_heads, int cap, int head_dim, int n_rot, const Buffer& delta,
                int n_slots, const Buffer& table, bool kv_half) {
  if (table.bytes() < rope_shift_table_bytes(n_heads, cap, n_rot)) throw cl::ClError("invalid launch: rope_shift table too small");
  c.kernel("kv_format.cl+rope.cl", "rope_shift", kv_option(kv_half))
      .args(k_cache, cap, head_dim, n_rot, delta, n_slots, table)
      .launch(c.queue(), {size_t(n_rot / 2), size_t(n_slots), size_t(n_heads)});
}

void swiglu(Context& c, const Buffer& gu, int n_rows, int n_ff, Buffer& act) {
  c.kernel("activations.cl+elementwise.cl", "swiglu").args(gu, n_ff, act).launch(c.queue(), {size_t(n_ff), size_t(n_rows)});
}

void geglu_tanh(Context& c, const Buffer& gu, int n_rows, int n_ff, Buffer& act) {
  c.kernel("activations.cl+elementwise.cl", "geglu_tanh").args(gu, n_ff, act).launch(c.queue(), {size_t(n_ff), size_t(n_rows)});
}

void scale(Context& c, Buffer& x, size_t n, float s) {
  if (x.bytes() < n * 4) throw cl::ClError("invalid launch: scale past the buffer");
  c.kernel("activations.cl+elementwise.cl", "scale").args(x, static_cast<int>(n), s).launch(c.queue(), {n});
}

void kv_gather(Context& c, const Buffer& src, Buffer& dst, int n_kv_heads, int cap, int head_dim, const Buffer& keep,
               int n_keep, bool kv_half) {
  c.kernel("kv_format.cl+kv_cache.cl", "kv_gather", kv_option(kv_half))
      .args(src, dst, cap, head_dim, keep, n_keep)
      .launch(c.queue(), {size_t(head_dim), size_t(n_keep), size_t(n_kv_heads)});
}

static std::string attention_options(const AttentionShape& s) {
  if (s.head_dim % 4 || s.n_heads % s.n_kv_heads)
    throw cl::ClError("invalid launch: attention needs head_dim % 4 == 0 and n_heads % n_kv_heads == 0");
  return "-DHEAD_DIM=" + std::to_string(s.head_dim) + " -DGROUP=" + std::to_string(s.n_heads / s.n_kv_heads) +
         (s.kv_half ? " -DKV_HALF" : "");
}

float score_scale(const AttentionShape& s) {
  return s.scale > 0.f ? s.scale : 1.0f / std::sqrt(static_cast<float>(s.head_dim));
}

// Global layers get a window past the capacity (nothing cut; the kernels' index arithmetic
// stays far from int overflow).
int window_arg(const AttentionShape& s) { return s.window > 0 && s.window <= s.cap ? s.window : s.cap + 1; }

// Work-group shape of the attention kernels that leave the group to the driver: their
// work-items keep kilobytes of private arrays (attention_mass_vec16: the block's keys, 4 KiB at
// head_dim 64; attention_vec16: 16 rows' queries and sums, 8-34 KiB). PoCL runs a work-group
// on one thread's stack (8 MiB) and, left to choose, made a whole launch one group of up to
// 4,096 items: a 16K-token SnapKV read (3,084 items of attention_mass_vec16) and `--chunk
// 4096` (attention_vec16) overflowed it and crashed. On CPU devices these kernels go in
// groups of kCpuAttentionGroup items along dim 0 (the kernels return for items past the end
// of the rounded-up range; no speed change on PoCL); GPUs keep the driver's choice.
constexpr size_t kCpuAttentionGroup = 8;
static cl::NDRange attention_group(const Context& c) {
  return c.device().type == "cpu" ? cl::NDRange(kCpuAttentionGroup, 1) : cl::NDRange();
}

int decode_split_ways(const AttentionShape& s, int n_past, const DecodeSplit& split) {
  const int blocks = (std::min(n_past + 1, window_arg(s)) + 15) / 16;
  const int splits = std::max(1, std::min(split.splits, blocks));
  if (splits > 1 && !(split.part && split.count && split.part->bytes() >= decode_split_part_bytes(s, splits) &&
                      split.count->bytes() >= decode_split_count_bytes(s)))
    throw cl::ClError("invalid launch: decode attention split " + std::to_string(splits) +
                      " ways without scratch for it");
  return splits;
}

int decode_splits(const Context& c, const AttentionShape& s) {
  const uint64_t units = std::max<uint64_t>(1, c.device().compute_units);
  return static_cast<int>(std::min<uint64_t>((2 * units + s.n_kv_heads - 1) / s.n_kv_heads, 64));
}

size_t decode_split_part_bytes(const AttentionShape& s, int splits) {
  return size_t(s.n_heads) * std::max(1, splits) * (s.head_dim + 2) * sizeof(float);
}
size_t decode_split_count_bytes(const AttentionShape& s) { return size_t(s.n_kv_heads) * sizeof(cl_int); }

void attention(Context& c, const AttentionShape& s, const Buffer& q, int ldq, const Buffer& k_cache,
               const Buffer& v_cache, int n_past, int n, Buffer& out, int ldo, Buffer& lse,
               const DecodeSplit& split) {
  if (n_past + n > s.cap) throw cl::ClError("invalid launch: attention past the KV capacity");
  const float scale = score_scale(s);
  const int window = window_arg(s);
  if (c.tuning().attention_vec16 && n > 1) {
    // Query rows per work-item, one per vector lane (4, 8 or 16). "auto": 16, which on PoCL
    // (2-core AVX2 EPYC) ran fastest for both head sizes we run (`bench --attention`,
    // docs/benchmarks.md). The rows per item change no bit of the output (attention.cl).
    const int tuned = c.tuning().attention_vec16_rows;
    const int rows = tuned > 0 ? tuned : 16;
    c.kernel("kv_format.cl+vector_reduce.cl+attention.cl", "attention_vec16",
             attention_options(s) + " -DVEC16 -DVEC_ROWS=" + std::to_string(rows))
        .args(q, ldq, k_cache, v_cache, s.cap, n_past, n, scale, out, ldo, lse, s.n_heads, window)
        .launch(c.queue(), {size_t((n + rows - 1) / rows), size_t(s.n_heads)}, attention_group(c));
    return;
  }
  const int rows = c.tuning().attention_tile_rows;
  if (rows > 1 && n > 1) {
    // Tiled variant: a work-group of `rows` query rows shares each tile of keys and values.
    const int key_tile = c.tuning().attention_key_tile;
    if (key_tile < 16 || key_tile % 16) throw cl::ClError("platforms/: attention_key_tile must be a multiple of 16");
    c.kernel("kv_format.cl+vector_reduce.cl+attention.cl", "attention_tiled",
             attention_options(s) + " -DTILE_ROWS=" + std::to_string(rows) + " -DKEY_TILE=" + std::to_string(key_tile))
        .args(q, ldq, k_cache, v_cache, s.cap, n_past, n, scale, out, ldo, lse, s.n_heads, window)
        .launch(c.queue(), {size_t(n), size_t(s.n_kv_heads)}, {size_t(rows), 1});
    return;
  }
  if (n == 1 && c.tuning().attention_vec16 && s.head_dim % 16 == 0) {
    // Decode on a CPU device, keys in the vector lanes. Where a KV head's query heads fit 16
    // vectors of sums (GROUP * head_dim <= 256 floats), work-items per KV head, its query heads
    // sharing each block of keys and values as it is read, split.splits of them per KV head
    // (at most one per block; decode_splits makes the items twice the compute units, so the
    // threads share the work evenly: SmolLM2's 3 KV heads run 2 items each on 2 cores). Else
    // (Gemma 3 270M: 4 query heads of 256 floats per KV head) a work-item per query head.
    const int group = s.n_heads / s.n_kv_heads;
    if (group * s.head_dim <= 256) {
      const int splits = decode_split_ways(s, n_past, split);
      c.kernel({"attention_decode_lanes_group", {s.head_dim, s.n_heads, s.n_kv_heads, s.kv_half}},
               "kv_format.cl+vector_reduce.cl+attention.cl", "attention_decode_lanes_group",
               [&] { return attention_options(s) + " -DDECODE_LANES"; })
          .args(q, k_cache, v_cache, s.cap, n_past, scale, out, lse, s.n_heads, window, splits,
                splits > 1 ? *split.part : out, splits > 1 ? *split.count : out)
          .launch(c.queue(), {size_t(s.n_kv_heads) * splits}, {1});
      return;
    }
    c.kernel("kv_format.cl+vector_reduce.cl+attention.cl", "attention_decode_lanes",
             attention_options(s) + " -DDECODE_LANES")
        .args(q, k_cache, v_cache, s.cap, n_past, scale, out, lse, s.n_heads, window)
        .launch(c.queue(), {size_t(s.n_heads)}, {1});
    return;
  }
  if (n == 1) {
    // Decode: SPLIT items per KV head share the keys (attention_decode_split), as many as the
    // device allows (each holds 64 floats of local memory); 1 is the one-item kernel below.
    const int split = static_cast<int>(std::min<uint64_t>(
        {uint64_t(std::max(1, c.tuning().attention_decode_split)), c.device().max_work_group_size,
         c.device().local_mem_bytes / (64 * sizeof(float))}));
    if (split > 1) {
      c.kernel("kv_format.cl+vector_reduce.cl+attention.cl", "attention_decode_split",
               attention_options(s) + " -DSPLIT=" + std::to_string(split))
          .args(q, k_cache, v_cache, s.cap, n_past, scale, out, lse, s.n_heads, window)
          .launch(c.queue(), {size_t(split), size_t(s.n_kv_heads)}, {size_t(split), 1});
      return;
    }
  }
  c.kernel("kv_format.cl+vector_reduce.cl+attention.cl", "attention", attention_options(s))
      .args(q, ldq, k_cache, v_cache, s.cap, n_past, n, scale, out, ldo, lse, s.n_heads, window)
      .launch(c.queue(), {size_t(n), size_t(s.n_kv_heads)}, attention_group(c));
}

void attention_mass(Context& c, const AttentionShape& s, const Buffer& q, int ldq, const Buffer& k_cache,
                    int n_past, int r0, int r1, const Buffer& lse, Buffer& mass, size_t mass_offset) {
  if (c.tuning().attention_vec16) {
    // 16 entries per work-item, the same sums bit for bit (cl_kernels/attention.cl): on PoCL
    // the per-entry kernel ran H2O's full-chunk mass at a fifth of the attention's rate.
    c.kernel("kv_format.cl+vector_reduce.cl+attention.cl", "attention_mass_vec16", attention_options(s))
        .args(q, ldq, k_cache, s.cap, n_past, r0, r1, score_scale(s), lse, s.n_heads, mass,
              static_cast<int>(mass_offset), window_arg(s))
        .launch(c.queue(), {size_t((n_past + r1 + 15) / 16), size_t(s.n_kv_heads)}, attention_group(c));
    return;
  }
  c.kernel("kv_format.cl+vector_reduce.cl+attention.cl", "attention_mass", attention_options(s))
      .args(q, ldq, k_cache, s.cap, n_past, r0, r1, score_scale(s), lse, s.n_heads, mass, static_cast<int>(mass_offset),
            window_arg(s))
      .launch(c.queue(), {size_t(n_past + r1), size_t(s.n_kv_heads)}, attention_group(c));
}

void ce_init(Context& c, Buffer& m, Buffer& s, Buffer& tl, int n) {
  c.kernel("vector_reduce.cl+cross_entropy.cl", "ce_init").args(m, s, tl, n).launch(c.queue(), {size_t(n)});
}

void ce_update(Context& c, const Buffer& logits, int n, int tile, int v0, const Buffer& targets, Buffer& m, Buffer& s,
               Buffer& tl) {
  c.kernel("vector_reduce.cl+cross_entropy.cl", "ce_update")
      .args(logits, n, tile, v0, targets, m, s, tl)
      .launch(c.queue(), {size_t(n)});
}

// Items of argmax_row's one work-group: a power of two every device's work-group size allows.
constexpr int kArgmaxItems = 64;

void argmax_row(Context& c, const Buffer& x, int n, Buffer& out) {
  if (n < 1 || x.bytes() < size_t(n) * sizeof(float) || out.bytes() < sizeof(int))
    throw cl::ClError("invalid launch: argmax_row of " + std::to_string(n) + " floats");
  const int chunk = (n + kArgmaxItems - 1) / kArgmaxItems;
  c.kernel({"argmax_row"}, "vector_reduce.cl+argmax.cl", "argmax_row",
           [] { return "-DARGMAX_ITEMS=" + std::to_string(kArgmaxItems); })
      .args(x, n, chunk, out)
      .launch(c.queue(), {size_t(kArgmaxItems)}, {size_t(kArgmaxItems)});
}

}  // namespace infinipot::ops
