// Launchers of attention.cl.
#include "runtime/ops/attention.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "runtime/cl_error.h"

namespace infinipot::ops {

constexpr const char* kSources = "kv_format.cl+vector_reduce.cl+attention.cl";

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
  if (splits > 1 && !(split.part && split.part->bytes() >= decode_split_part_bytes(s, splits)))
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
int attention_key_tile(int tuned, int head_dim, uint64_t local_mem_bytes) {
  const uint64_t per_key = 2ull * static_cast<uint64_t>(head_dim) * sizeof(float);  // its key and its value
  int tile = tuned - tuned % 16;
  while (tile >= 16 && static_cast<uint64_t>(tile) * per_key > local_mem_bytes) tile -= 16;
  return tile >= 16 ? tile : 0;
}

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
    c.kernel(kSources, "attention_vec16",
             attention_options(s) + " -DVEC16 -DVEC_ROWS=" + std::to_string(rows))
        .args(q, ldq, k_cache, v_cache, s.cap, n_past, n, scale, out, ldo, lse, s.n_heads, window)
        .launch(c.queue(), {size_t((n + rows - 1) / rows), size_t(s.n_heads)}, attention_group(c));
    return;
  }
  const int rows = c.tuning().attention_tile_rows;
  const int tuned_tile = c.tuning().attention_key_tile;
  if (rows > 1 && n > 1 && (tuned_tile < 16 || tuned_tile % 16))
    throw cl::ClError("platforms/: attention_key_tile must be a multiple of 16");
  const int key_tile = attention_key_tile(tuned_tile, s.head_dim, c.device().local_mem_bytes);
  if (rows > 1 && n > 1 && key_tile > 0) {
    // Tiled variant: a work-group of `rows` query rows shares each tile of keys and values.
    c.kernel(kSources, "attention_tiled",
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
      auto options = [&] { return attention_options(s) + " -DDECODE_LANES"; };
      const Context::LaunchKey key{"attention_decode_lanes_group", {s.head_dim, s.n_heads, s.n_kv_heads, s.kv_half}};
      c.kernel(key, kSources, "attention_decode_lanes_group", options)
          .args(q, k_cache, v_cache, s.cap, n_past, scale, out, lse, s.n_heads, window, splits,
                splits > 1 ? *split.part : out)
          .launch(c.queue(), {size_t(s.n_kv_heads) * splits}, {1});
      // Split: the items' partials merged in a second launch, one work-item per query head
      // (OpenCL orders the items' writes before it only at the launch boundary).
      if (splits > 1)
        c.kernel({"attention_decode_combine", key.values}, kSources, "attention_decode_combine", options)
            .args(s.n_heads, splits, *split.part, out, lse)
            .launch(c.queue(), {size_t(s.n_heads)}, {1});
      return;
    }
    c.kernel(kSources, "attention_decode_lanes",
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
      c.kernel(kSources, "attention_decode_split",
               attention_options(s) + " -DSPLIT=" + std::to_string(split))
          .args(q, k_cache, v_cache, s.cap, n_past, scale, out, lse, s.n_heads, window)
          .launch(c.queue(), {size_t(split), size_t(s.n_kv_heads)}, {size_t(split), 1});
      return;
    }
  }
  c.kernel(kSources, "attention", attention_options(s))
      .args(q, ldq, k_cache, v_cache, s.cap, n_past, n, scale, out, ldo, lse, s.n_heads, window)
      .launch(c.queue(), {size_t(n), size_t(s.n_kv_heads)}, attention_group(c));
}

void attention_mass(Context& c, const AttentionShape& s, const Buffer& q, int ldq, const Buffer& k_cache,
                    int n_past, int r0, int r1, const Buffer& lse, Buffer& mass, size_t mass_offset) {
  if (c.tuning().attention_vec16) {
    // 16 entries per work-item, the same sums bit for bit (cl_kernels/attention.cl): on PoCL
    // the per-entry kernel ran a full chunk's mass at a fifth of the attention's rate.
    c.kernel(kSources, "attention_mass_vec16", attention_options(s))
        .args(q, ldq, k_cache, s.cap, n_past, r0, r1, score_scale(s), lse, s.n_heads, mass,
              static_cast<int>(mass_offset), window_arg(s))
        .launch(c.queue(), {size_t((n_past + r1 + 15) / 16), size_t(s.n_kv_heads)}, attention_group(c));
    return;
  }
  c.kernel(kSources, "attention_mass", attention_options(s))
      .args(q, ldq, k_cache, s.cap, n_past, r0, r1, score_scale(s), lse, s.n_heads, mass, static_cast<int>(mass_offset),
            window_arg(s))
      .launch(c.queue(), {size_t(n_past + r1), size_t(s.n_kv_heads)}, attention_group(c));
}

}  // namespace infinipot::ops
