// Packed single-precision GEMM for prefill: C[M][N] (+)= A[M][K] * B[N][K]^T.
// Both operands are packed so the inner loop reads contiguous vectors:
//   Ap: [M_pad/PANEL_M panels][K][PANEL_M]  (pack_a below; rows past M zero)
//   Bp: [N_pad/16 panels][K][16]            (dequant.cl: dequant_to_panels, or gemm_dequant below)
//   C:  row-major from element c_off, leading dimension ldc; columns [0, N) written
// Each work-item computes a TILE_M x 16 tile held in TILE_M float16 registers (-D TILE_M = 8,
// 6 or 4; -D PANEL_M, the launcher's ops::a_panel_rows: 8, or 6 for 6-row tiles). 8 rows are
// 8 AVX-512 registers (PoCL reached 160-173 GFLOP/s on 2 cores); AVX2 has 16 registers of 8
// floats, where 6 rows (12 accumulators, 2 for the B row, 1 broadcast) keep both FMA pipes
// busy through their latency and 4 rows (8 accumulators) do not. ACCUM (-D) adds into C.
// A's elements are read one at a time from memory, never as one vector split into lanes: LLVM
// folds a scalar load into its FMA as an embedded broadcast (AVX-512 {1to16}) or a
// vbroadcastss from memory, where from a vload8 it split the lanes with vbroadcastss and
// vpermps, 8 shuffles per 8 FMAs on the port the second FMA unit shares (SmolLM2's prefill
// products 100 -> 120 GFLOP/s on a 2-core AVX-512 Xeon, `infinipot bench --gemm`).
#if !defined(TILE_M) || !defined(PANEL_M) || PANEL_M % TILE_M != 0
#error "compile gemm.cl with -DTILE_M (8, 6 or 4) and -DPANEL_M (a multiple of it)"
#endif
// The tile product: acc[i] = sum_k a[k * PANEL_M + i] * b[k * 16 .. + 15] for the tile's rows i.
inline void tile_product(__global const float* a, __global const float* b, const int K, float16* acc) {
#if TILE_M != 8 && TILE_M != 6 && TILE_M != 4
#error "gemm_packed: TILE_M is 8, 6 or 4"
#endif
  // TILE_M named accumulators (the rows past TILE_M are never touched and compile away):
  // separate variables stay in registers, where an array indexed in a loop would not.
  float16 c0 = 0, c1 = 0, c2 = 0, c3 = 0, c4 = 0, c5 = 0, c6 = 0, c7 = 0;
  for (int k = 0; k < K; ++k) {
    const float16 bv = vload16(0, b + k * 16);
    __global const float* ak = a + k * PANEL_M;
    c0 = fma((float16)(ak[0]), bv, c0);
    c1 = fma((float16)(ak[1]), bv, c1);
    c2 = fma((float16)(ak[2]), bv, c2);
    c3 = fma((float16)(ak[3]), bv, c3);
#if TILE_M > 4
    c4 = fma((float16)(ak[4]), bv, c4);
    c5 = fma((float16)(ak[5]), bv, c5);
#endif
#if TILE_M > 6
    c6 = fma((float16)(ak[6]), bv, c6);
    c7 = fma((float16)(ak[7]), bv, c7);
#endif
  }
  acc[0] = c0, acc[1] = c1, acc[2] = c2, acc[3] = c3;
#if TILE_M > 4
  acc[4] = c4, acc[5] = c5;
#endif
#if TILE_M > 6
  acc[6] = c6, acc[7] = c7;
#endif
}

#if TILE_M == 8
// Two panels at once (b0, b1: 16 columns each): 16 accumulators, each A element loaded once
// for 2 FMAs, 10 loads per 16 FMAs instead of 9 per 8, which left AVX-512's two load ports
// the bound (SmolLM2's prefill products 96-140 -> 153-170 GFLOP/s, `bench --gemm`).
inline void tile_product_wide(__global const float* a, __global const float* b0, __global const float* b1,
                              const int K, float16* acc0, float16* acc1) {
  float16 c0 = 0, c1 = 0, c2 = 0, c3 = 0, c4 = 0, c5 = 0, c6 = 0, c7 = 0;
  float16 e0 = 0, e1 = 0, e2 = 0, e3 = 0, e4 = 0, e5 = 0, e6 = 0, e7 = 0;
  for (int k = 0; k < K; ++k) {
    const float16 bv = vload16(0, b0 + k * 16);
    const float16 bw = vload16(0, b1 + k * 16);
    __global const float* ak = a + k * PANEL_M;
    float16 t;
    t = (float16)(ak[0]); c0 = fma(t, bv, c0); e0 = fma(t, bw, e0);
    t = (float16)(ak[1]); c1 = fma(t, bv, c1); e1 = fma(t, bw, e1);
    t = (float16)(ak[2]); c2 = fma(t, bv, c2); e2 = fma(t, bw, e2);
    t = (float16)(ak[3]); c3 = fma(t, bv, c3); e3 = fma(t, bw, e3);
    t = (float16)(ak[4]); c4 = fma(t, bv, c4); e4 = fma(t, bw, e4);
    t = (float16)(ak[5]); c5 = fma(t, bv, c5); e5 = fma(t, bw, e5);
    t = (float16)(ak[6]); c6 = fma(t, bv, c6); e6 = fma(t, bw, e6);
    t = (float16)(ak[7]); c7 = fma(t, bv, c7); e7 = fma(t, bw, e7);
  }
  acc0[0] = c0, acc0[1] = c1, acc0[2] = c2, acc0[3] = c3, acc0[4] = c4, acc0[5] = c5, acc0[6] = c6, acc0[7] = c7;
  acc1[0] = e0, acc1[1] = e1, acc1[2] = e2, acc1[3] = e3, acc1[4] = e4, acc1[5] = e5, acc1[6] = e6, acc1[7] = e7;
}
#endif

// C rows mb * TILE_M .. and columns nb * 16 .. (+)= the tile, clipped to M x N.
inline void store_tile(const float16* acc, const int M, const int N, const int mb, const int nb, __global float* C,
                       const int c_off, const int ldc) {
  const int n0 = nb * 16;
  for (int i = 0; i < TILE_M; ++i) {
    const int m = mb * TILE_M + i;
    if (m >= M) break;
    __global float* dst = C + c_off + (size_t)m * ldc + n0;
    float r[16];
    vstore16(acc[i], 0, r);
    const int cols = min(16, N - n0);
    for (int j = 0; j < cols; ++j) {
#ifdef ACCUM
      dst[j] += r[j];
#else
      dst[j] = r[j];
#endif
    }
  }
}

// The TILE_M rows of Ap that tile mb reads (inside panel mb * TILE_M / PANEL_M).
inline __global const float* a_tile(__global const float* Ap, const int K, const int mb) {
  return Ap + (size_t)(mb * TILE_M / PANEL_M) * K * PANEL_M + (mb * TILE_M) % PANEL_M;
}

__kernel void gemm_packed(const int M, const int N, const int K, __global const float* Ap,
                          __global const float* Bp, __global float* C, const int c_off, const int ldc) {
  const int nb = get_global_id(0);
  const int mb = get_global_id(1);  // a TILE_M-row block
  if (nb * 16 >= N || mb * TILE_M >= M) return;
  float16 acc[TILE_M];
  tile_product(a_tile(Ap, K, mb), Bp + (size_t)nb * K * 16, K, acc);
  store_tile(acc, M, N, mb, nb, C, c_off, ldc);
}

#ifdef WTYPE
// gemm_packed with the dequantization in it (compiled after quant_formats.cl and dequant.cl,
// whose dequant_panel8 it shares with dequant_to_panels): a work-group
// is one 16-row panel of W (rows row0 + 16 * group .. , N rows in all), or two with WIDE
// (-D, 8-row tiles: tile_product_wide), and every tile of A, item t taking tiles t, t + L, ...
// (L = the local size = the global size in dim 0: a fixed size, so that a CPU driver that
// compiles a kernel per work-group size, as PoCL does, compiles this one once and not once
// per prompt length). Its work-items first dequantize the panels into their place in Bp, as dequant_to_panels
// would, then multiply them: a panel (K x 64 bytes) is still in the cache when the tiles read
// it, where dequant_to_panels writes the whole matrix as floats (4x-8x its quantized size) to
// memory and gemm_packed reads it back. WIDE with an odd number of panels: the last group has
// one, and its second product reads that panel again and is not stored.
__kernel void gemm_dequant(const int M, const int N, const int K, __global const float* Ap,
                           __global const uchar* W, const int row_bytes, const int row0, __global float* Bp,
                           __global float* C, const int c_off, const int ldc) {
#ifdef WIDE
  const int panels = (N + 15) / 16, nb = 2 * get_group_id(1), nb1 = min(nb + 1, panels - 1);
  const int rows_here = nb + 1 < panels ? 32 : 16;
#else
  const int nb = get_group_id(1);
  const int rows_here = 16;
#endif
  __global float* b = Bp + (size_t)nb * K * 16;  // the group's panels, one after the other
  const int groups = K / 8;  // a unit of work: 8 weights of one row
  for (int u = get_local_id(0); u < rows_here * groups; u += get_local_size(0)) {
    const int o = u / groups, g = u - o * groups;
    dequant_panel8(W, row_bytes, row0, N, K, nb * 16 + o, g, Bp);
  }
  barrier(CLK_GLOBAL_MEM_FENCE);
  for (int mb = get_local_id(0); mb * TILE_M < M; mb += get_local_size(0)) {
#ifdef WIDE
    float16 acc0[TILE_M], acc1[TILE_M];
    tile_product_wide(a_tile(Ap, K, mb), b, Bp + (size_t)nb1 * K * 16, K, acc0, acc1);
    store_tile(acc0, M, N, mb, nb, C, c_off, ldc);
    if (nb + 1 < panels) store_tile(acc1, M, N, mb, nb + 1, C, c_off, ldc);
#else
    float16 acc[TILE_M];
    tile_product(a_tile(Ap, K, mb), b, K, acc);
    store_tile(acc, M, N, mb, nb, C, c_off, ldc);
#endif
  }
}
#endif

// X: [M][K] row-major (leading dimension ldx) -> Ap: [M_pad/PANEL_M][K][PANEL_M], rows past M zero.
__kernel void pack_a(__global const float* X, const int M, const int K, const int ldx, __global float* Ap) {
  const int k = get_global_id(0);
  const int mb = get_global_id(1);
  if (k >= K) return;
  __global float* dst = Ap + ((size_t)mb * K + k) * PANEL_M;
  for (int i = 0; i < PANEL_M; ++i) {
    const int m = mb * PANEL_M + i;
    dst[i] = m < M ? X[(size_t)m * ldx + k] : 0.0f;
  }
}
