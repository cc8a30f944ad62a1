// A decode row's whole transformer block in one launch (needs quant_formats.cl, activations.cl,
// kv_format.cl, vector_reduce.cl, rope.cl, native_dot.cl with NORM and NATIVE_K = N_EMBD, attention.cl
// with DECODE_LANES). The five steps that otherwise take a launch each (six where attention is
// split), because each needs the whole output of the one before (Forward::layer):
//   A  q|k|v = (RMSNorm(x) * attn_nw) . Wqkv, RoPE on q and k, k and v into the KV store
//   B  attention of the GROUP query heads of each KV head (attention.cl's decode_lanes_group_item),
//      split: then the partials merged per query head (attention.cl's decode_combine_head)
//   C  x += attn . Wo
//   D  act = GLU((RMSNorm(x) * ffn_nw) . Wgate, (RMSNorm(x) * ffn_nw) . Wup)
//   E  x += act . Wdown
// Why one launch: on a CPU device (PoCL) each launch wakes the driver's sleeping threads and
// waits for the slowest one (docs/benchmarks.md); inside one launch the steps meet at counters.
//
// The work-groups (one item each, as many as the device has compute units: -DWORKERS is not
// needed, get_num_groups says it) take the chunks of each step from a counter: sync[2s] counts
// the chunks of step s handed out, sync[2s + 1] those finished. A group that finds step s
// handed out waits until every chunk of it is finished, then starts on step s + 1. It waits
// only for chunks that running groups took, so nothing can deadlock however many of the groups
// the device runs at once (one thread that runs the groups one after the other does all the
// work in the first and finds everything done in the rest). The last group to leave puts the
// counters back to zero for the next launch.
// OpenCL 1.2 orders no global memory between the work-groups of a launch, so these counters
// rest on the device: PoCL's CPU device (cache-coherent memory, mem_fence a real fence), the
// only one that runs this kernel (decode_layer_supported asks for the CPU's own 8-bit dot and
// the vec16 tuning). Elsewhere a block takes its separate launches, where the launch boundaries
// order everything (attention.cl's split decode merges in a launch of its own there).
//
// Every product is native_dot.cl's, row for row the arithmetic of matvec.cl's NATIVE_DOT
// variants (the input quantized per 32-block once per group and step, the norm's 1 / rms on
// the finished sums, RoPE as ROPE_KV, the GLU as GLU, the residual added as ACCUM), and the
// attention is attention_decode_lanes_group's: so the block's results are those of its five
// launches, bit for bit (ModelReferenceDecodeLayer).
//
// -D: N_EMBD, N_FF, Q_DIM (n_head * HEAD_DIM), N_KV (KV heads), GLU (1 SiLU, 2 GELU-tanh),
//     with WTYPE (every weight of the block in that encoding), NATIVE_DOT, HEAD_DIM, GROUP.
//   x      [N_EMBD] float, the residual row, updated in place
//   qkv    [Q_DIM + 2 N_KV HEAD_DIM] float: q|k|v after RoPE (attention reads q from it)
//   attn   [Q_DIM] float, lse [n_head]: attention's output and log-sum-exp
//   act    [N_FF] float: the GLU's output
//   part   attention's split scratch (attention.cl)
//   sync   [SYNC_INTS] int (-D, the host's kDecodeLayerSyncInts: 2 a step and the exit count),
//          zero between launches
#ifndef NORM
#error "decode_layer.cl: native_dot.cl must be compiled with NORM (steps A and D quantize a normed row)"
#endif
#define QKV_ROWS (Q_DIM + 2 * N_KV * HEAD_DIM)
#define CHUNK_ROWS 64  // rows of a product per chunk (a multiple of 4: whole RoPE pairs, whole items)
#define CHUNK_FEATURES 16  // GLU features per chunk (32 rows of gate and up)
#define MAX_K (N_FF > N_EMBD ? (N_FF > Q_DIM ? N_FF : Q_DIM) : (N_EMBD > Q_DIM ? N_EMBD : Q_DIM))
#define MAX_NB (MAX_K / 32)
#define SYNC_EXIT (SYNC_INTS - 1)  // the count of groups out, after the five steps' pairs

NATIVE_ROW_DOT_OF_WIDTH(native_row_dot_q, Q_DIM)
NATIVE_ROW_DOT_OF_WIDTH(native_row_dot_ff, N_FF)

inline int chunks_of(const int n, const int per) { return (n + per - 1) / per; }

// The next chunk of step s, or -1 when all n are handed out.
inline int take_chunk(__global volatile int* sync, const int s, const int n) {
  const int c = atomic_inc(&sync[2 * s]);
  return c < n ? c : -1;
}
inline void chunk_done(__global volatile int* sync, const int s) {
  mem_fence(CLK_GLOBAL_MEM_FENCE);  // the chunk's results before the count that publishes them
  atomic_inc(&sync[2 * s + 1]);
}
inline void wait_step(__global volatile int* sync, const int s, const int n) {
  while (sync[2 * s + 1] < n) {
  }
  mem_fence(CLK_GLOBAL_MEM_FENCE);
}

// x * nw quantized (matvec.cl's NORM + NATIVE_DOT input), its 1 / rms returned.
inline float quantize_normed(__global const float* x, __global const float* nw, __local int* xq, __local float* xd,
                             __local float* xs, __local float* ssq, const float eps) {
  const int nb = N_EMBD / 32;
  for (int b = 0; b < native_padded_blocks(nb); ++b) native_quantize_block(x, nw, b, nb, xq, xd, xs, ssq);
  return rsqrt(native_sum_squares(ssq, nb) / (float)N_EMBD + eps);
}
inline void quantize_row(__global const float* v, const int k, __local int* xq, __local float* xd, __local float* xs) {
  for (int b = 0; b < native_padded_blocks(k / 32); ++b) native_quantize_plain(v, b, k / 32, xq, xd, xs);
}

// Chunk c of rows of W . input (quantized in xq, xd, xs) added into x: steps C (Wo, input
// attn of width Q_DIM) and E (Wdown, input act of width N_FF).
inline void add_rows(__global float* x, __global const uchar* w, const int row_bytes, const int c, const bool ff,
                     __local const int* xq, __local const float* xd, __local const float* xs) {
  for (int o0 = c * CHUNK_ROWS; o0 < min((c + 1) * CHUNK_ROWS, N_EMBD); o0 += 4) {
    float s[4];
    for (int i = 0; i < 4; ++i) {
      __global const uchar* row = w + (size_t)(o0 + i) * row_bytes;
      s[i] = o0 + i >= N_EMBD ? 0.0f : ff ? native_row_dot_ff(row, xq, xd, xs) : native_row_dot_q(row, xq, xd, xs);
    }
    for (int i = 0; i < min(4, N_EMBD - o0); ++i) x[o0 + i] += s[i];
  }
}

__kernel void decode_layer(__global float* x, __global const float* attn_nw, __global const uchar* wqkv,
                           const int qkv_row_bytes, __global const float2* cs, const int n_rot,
                           __global kv_t* k_cache, __global kv_t* v_cache, const int cap, const int n_past,
                           __global float* qkv, const float scale, const int window, const int splits,
                           __global float* part, __global float* attn,
                           __global float* lse, __global const uchar* wo, const int wo_row_bytes,
                           __global const float* ffn_nw, __global const uchar* wgate, __global const uchar* wup,
                           const int up_row0, const int gu_row_bytes, __global float* act,
                           __global const uchar* wdown, const int down_row_bytes, const float eps,
                           __global volatile int* sync) {
  __local int xq[(MAX_NB + NATIVE_UNIT) * 8];
  __local float xd[MAX_NB + NATIVE_UNIT], xs[MAX_NB + NATIVE_UNIT], ssq[MAX_NB + NATIVE_UNIT];

  // A: q|k|v, rotated; k and v stored at slot n_past.
  const int n_a = chunks_of(QKV_ROWS, CHUNK_ROWS);
  float inv_rms = 0.0f;
  bool ready = false;  // this group's quantized input for the step (made on its first chunk)
  for (int c; (c = take_chunk(sync, 0, n_a)) >= 0;) {
    if (!ready) inv_rms = quantize_normed(x, attn_nw, xq, xd, xs, ssq, eps);
    ready = true;
    for (int o0 = c * CHUNK_ROWS; o0 < min((c + 1) * CHUNK_ROWS, QKV_ROWS); o0 += 4) {
      float s[4];
      for (int i = 0; i < 4; ++i) s[i] = native_row_dot(wqkv + (size_t)(o0 + i) * qkv_row_bytes, xq, xd, xs);
      for (int i = 0; i < 4; ++i) s[i] *= inv_rms;
      rope_store_rows4(s, o0, cs, HEAD_DIM, n_rot, Q_DIM, N_KV, k_cache, v_cache, cap, n_past);
      for (int i = 0; i < 4; ++i) qkv[o0 + i] = s[i];
    }
    chunk_done(sync, 0);
  }
  wait_step(sync, 0, n_a);

  // B: attention, `splits` items per KV head, then (split) their partials merged per query head.
  const int n_b = N_KV * splits;
  for (int c; (c = take_chunk(sync, 1, n_b)) >= 0;) {
    decode_lanes_group_item(c / splits, c % splits, splits, qkv, k_cache, v_cache, cap, n_past, scale, attn, lse,
                            window, part);
    chunk_done(sync, 1);
  }
  wait_step(sync, 1, n_b);
  const int n_m = splits > 1 ? Q_DIM / HEAD_DIM : 0;
  for (int c; (c = take_chunk(sync, 2, n_m)) >= 0;) {
    decode_combine_head(c, splits, part, attn, lse);
    chunk_done(sync, 2);
  }
  wait_step(sync, 2, n_m);

  // C: x += attn . Wo
  const int n_c = chunks_of(N_EMBD, CHUNK_ROWS);
  ready = false;
  for (int c; (c = take_chunk(sync, 3, n_c)) >= 0;) {
    if (!ready) quantize_row(attn, Q_DIM, xq, xd, xs);
    ready = true;
    add_rows(x, wo, wo_row_bytes, c, false, xq, xd, xs);
    chunk_done(sync, 3);
  }
  wait_step(sync, 3, n_c);

  // D: act = GLU(gate, up) of the normed x.
  const int n_d = chunks_of(N_FF, CHUNK_FEATURES);
  ready = false;
  for (int c; (c = take_chunk(sync, 4, n_d)) >= 0;) {
    if (!ready) inv_rms = quantize_normed(x, ffn_nw, xq, xd, xs, ssq, eps);
    ready = true;
    for (int f0 = c * CHUNK_FEATURES; f0 < min((c + 1) * CHUNK_FEATURES, N_FF); f0 += 2) {
      const int no = min(2, N_FF - f0);
      float s[4];
      for (int i = 0; i < 4; ++i) {
        __global const uchar* row = i < 2 ? wgate + (size_t)(f0 + i) * gu_row_bytes
                                          : wup + (size_t)(up_row0 + f0 + i - 2) * gu_row_bytes;
        s[i] = i % 2 < no ? native_row_dot(row, xq, xd, xs) : 0.0f;
      }
      for (int i = 0; i < 4; ++i) s[i] *= inv_rms;
      for (int i = 0; i < no; ++i)
#if GLU == 1
        act[f0 + i] = silu(s[i]) * s[i + 2];
#else
        act[f0 + i] = gelu_tanh(s[i]) * s[i + 2];
#endif
    }
    chunk_done(sync, 4);
  }
  wait_step(sync, 4, n_d);

  // E: x += act . Wdown
  const int n_e = chunks_of(N_EMBD, CHUNK_ROWS);
  ready = false;
  for (int c; (c = take_chunk(sync, 5, n_e)) >= 0;) {
    if (!ready) quantize_row(act, N_FF, xq, xd, xs);
    ready = true;
    add_rows(x, wdown, down_row_bytes, c, true, xq, xd, xs);
    chunk_done(sync, 5);
  }

  // The last group out resets the counters (every other group has finished with them).
  mem_fence(CLK_GLOBAL_MEM_FENCE);
  if (atomic_inc(&sync[SYNC_EXIT]) == (int)get_num_groups(0) - 1)
    for (int i = 0; i <= SYNC_EXIT; ++i) sync[i] = 0;
}
