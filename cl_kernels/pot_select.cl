// The memory pot's choice of survivors on the device: the steps of pot/selection.cpp
// (choose_survivors, spread_scores, take_best), which is the host reference these match bit for
// bit. Launched by pot/device_choice.cpp.
//
// Layout. Scores and units are [n_layers][n_heads][stride] (floats, ints). A group is the set of
// (layer, head) rows that keep the same entries: g = layer_group * head_groups + head_group, its
// members the layers [lg * members_l, +members_l) and heads [hg * members_h, +members_h)
// (members_l = 1 per layer, n_layers otherwise; likewise heads). Scratch rows are [n_groups][cap]
// with cap >= n: sums and spread levels (float), window bounds (int), taken marks (uchar).
// Survivors are [n_layers][n_heads][keep] ints.
//
// Work shapes. Element-wise kernels: global (n, n_groups). Row kernels (pot_spread_runs,
// pot_take_best, pot_collect): one work-group per group, global (local, n_groups), local
// (local, 1) with any local size the kernel allows; `scan` is local scratch of local ints.
//
// Order of candidates (take_best): higher score first, NaN last, ties to the later slot. That is
// the order of the 64-bit key (score bits made monotone, NaN lowest) << 32 | slot, larger first,
// and -0 ranks as +0 because the host compares values.

// The first member row of group g, as an element offset into [n_layers][n_heads][stride].
inline size_t group_row(int g, int head_groups, int members_l, int members_h, int n_heads, int stride) {
  const int l0 = (g / head_groups) * members_l, h0 = (g % head_groups) * members_h;
  return ((size_t)l0 * n_heads + h0) * stride;
}

// Inclusive scan of scan[0..lsz) in place (FROM_RIGHT: from the last item down), after every item
// stored its value at scan[lid]. Uses lid and lsz; every item of the work-group must run it.
// The first barrier publishes those stores: without it an item reads its neighbour's slot
// before the neighbour wrote it wherever the two run apart (NVIDIA: across each 32-item warp;
// PoCL happened to run the stores first).
#define WG_SCAN(OP, IDENTITY, FROM_RIGHT)                                                   \
  barrier(CLK_LOCAL_MEM_FENCE);                                                           \
  for (int off = 1; off < lsz; off <<= 1) {                                               \
    const int src = FROM_RIGHT ? lid + off : lid - off;                                   \
    const int v = (src >= 0 && src < lsz) ? scan[src] : (IDENTITY);                       \
    barrier(CLK_LOCAL_MEM_FENCE);                                                         \
    scan[lid] = OP(scan[lid], v);                                                         \
    barrier(CLK_LOCAL_MEM_FENCE);                                                         \
  }
#define SUM(a, b) ((a) + (b))

// Item lid's share [*c0, *c1) of [lo, hi) (contiguous, in item order).
inline void chunk_of(int lo, int hi, int lid, int lsz, int* c0, int* c1) {
  const long chunk = ((long)(hi - lo) + lsz - 1) / lsz;
  *c0 = (int)min((long)hi, lo + lid * chunk);
  *c1 = (int)min((long)hi, *c0 + chunk);
}

// taken[g][j] = the outright keeps: the pinned prefix and the head entries after it
// (j < keep_end), and the newest (j >= recent_from).             taken: [n_groups][cap]
__kernel void pot_mark_keeps(__global uchar* taken, const int cap, const int n, const int keep_end,
                             const int recent_from) {
  const int j = get_global_id(0);
  if (j >= n) return;
  taken[(size_t)get_global_id(1) * cap + j] = (j < keep_end || j >= recent_from) ? 1 : 0;
}

// sum[g][j] = sum over the group's rows of score[row][j], NaN counting as nothing (NaN where every
// member is NaN), added in member order (layer-major) as the host does.
__kernel void pot_group_sum(__global const float* score, const int stride, const int n_heads, const int head_groups,
                            const int members_l, const int members_h, const int n, __global float* sum,
                            const int cap) {
  const int j = get_global_id(0), g = get_global_id(1);
  if (j >= n) return;
  const size_t row0 = group_row(g, head_groups, members_l, members_h, n_heads, stride);
  float acc = NAN;
  for (int l = 0; l < members_l; ++l)
    for (int h = 0; h < members_h; ++h) {
      const float v = score[row0 + ((size_t)l * n_heads + h) * stride + j];
      if (!isnan(v)) acc = isnan(acc) ? v : acc + v;
    }
  sum[(size_t)g * cap + j] = acc;
}

// The spread window of every slot j in [lo, hi) without units: [win_lo, win_hi] = [j - back,
// j + fwd] within [lo, hi).                        win_lo, win_hi: [n_groups][cap]
__kernel void pot_spread_windows(const int lo, const int hi, const int back, const int fwd, __global int* win_lo,
                                 __global int* win_hi, const int cap) {
  const int j = lo + get_global_id(0);
  if (j >= hi) return;
  const size_t row = (size_t)get_global_id(1) * cap;
  win_lo[row + j] = back >= j - lo ? lo : j - back;
  win_hi[row + j] = fwd >= hi - 1 - j ? hi - 1 : j + fwd;
}

// The same with units: [first(j) - back, last(j) + fwd] within [lo, hi), where [first(j),
// last(j)] is j's run of equal unit values. The unit row of group g is its first member's. Runs
// are found with two work-group scans (the last run start at or before j, the first run end at or
// after j), so a long run costs no more than a short one.
__kernel void pot_spread_runs(__global const int* unit, const int stride, const int n_heads, const int head_groups,
                              const int members_l, const int members_h, const int lo, const int hi, const int back,
                              const int fwd, __global int* win_lo, __global int* win_hi, const int cap,
                              __local int* scan) {
  const int lid = get_local_id(0), lsz = get_local_size(0), g = get_group_id(1);
  const size_t out = (size_t)g * cap;
  unit += group_row(g, head_groups, members_l, members_h, n_heads, stride);
  int c0, c1;
  chunk_of(lo, hi, lid, lsz, &c0, &c1);

  // first(j): the last run start in [lo, j]. Slot lo always starts a run.
  int last_start = -1;
  for (int j = c0; j < c1; ++j)
    if (j == lo || unit[j - 1] != unit[j]) last_start = j;
  scan[lid] = last_start;
  WG_SCAN(max, -1, 0)
  int first = lid > 0 ? scan[lid - 1] : -1;
  for (int j = c0; j < c1; ++j) {
    if (j == lo || unit[j - 1] != unit[j]) first = j;
    win_lo[out + j] = back >= first - lo ? lo : first - back;
  }
  barrier(CLK_LOCAL_MEM_FENCE);  // everyone has read scan before it is reused

  // last(j): the first run end in [j, hi). Slot hi - 1 always ends a run.
  int first_end = INT_MAX;
  for (int j = c1 - 1; j >= c0; --j)
    if (j == hi - 1 || unit[j + 1] != unit[j]) first_end = j;
  scan[lid] = first_end;
  WG_SCAN(min, INT_MAX, 1)
  int last = lid + 1 < lsz ? scan[lid + 1] : INT_MAX;
  for (int j = c1 - 1; j >= c0; --j) {
    if (j == hi - 1 || unit[j + 1] != unit[j]) last = j;
    win_hi[out + j] = fwd >= hi - 1 - last ? hi - 1 : last + fwd;
  }
}

// The better of two window maxima, x covering earlier slots: the larger, the earlier on equal
// values (the host scans left to right and replaces only on a strictly larger value), NaN only
// where both are NaN.
inline float earlier_max(float x, float y) { return (isnan(x) || y > x) ? y : x; }

// One level of the spread (a sparse table built one level per launch, two rows at a time):
// cur[i] = max of [i, i + 2^k); every j whose window length has floor(log2) == k takes
// max(cur[win_lo], cur[win_hi - 2^k + 1]); next[i] = max of [i, i + 2^(k+1)) when build_next.
// out[g][j] for j in [lo, hi).                      cur, next, out: [n_groups][cap]
__kernel void pot_spread_level(__global const float* cur, __global float* next, __global float* out,
                               __global const int* win_lo, __global const int* win_hi, const int cap, const int lo,
                               const int hi, const int k, const int build_next) {
  const int j = lo + get_global_id(0);
  if (j >= hi) return;
  const size_t row = (size_t)get_global_id(1) * cap;
  const int a = win_lo[row + j], b = win_hi[row + j];
  if (31 - (int)clz(b - a + 1) == k) out[row + j] = earlier_max(cur[row + a], cur[row + b - (1 << k) + 1]);
  if (build_next) next[row + j] = j + (1 << k) < hi ? earlier_max(cur[row + j], cur[row + j + (1 << k)]) : cur[row + j];
}

// The rank key of slot j: larger is better.
inline ulong choice_key(__global const float* score, int use_score, int j) {
  uint bits = 0;  // no scores (the final fill) or NaN: below every number, ties to the later slot
  if (use_score) {
    const float v = score[j];
    if (!isnan(v)) {
      const uint b = (as_uint(v) & 0x7fffffffu) == 0 ? 0u : as_uint(v);  // -0 ranks as +0
      bits = (b & 0x80000000u) ? ~b : (b | 0x80000000u);  // -inf -> 0x007fffff > NaN
    }
  }
  return ((ulong)bits << 32) | (uint)j;
}

// Marks the `count` best free slots of [lo, hi) in each group's row (all of them if fewer are
// free). A radix select over the key, 8 bits a pass from the top: each pass counts the candidates
// still tied with the chosen prefix by their next digit (local histogram), then item 0 picks the
// digit where the count from the top reaches what is still needed. It stops as soon as every
// candidate sharing the prefix is needed, then marks all keys at or above the prefix.
//   score: [n_groups][cap] (ignored when use_score is 0)   taken: [n_groups][cap]
__kernel void pot_take_best(__global const float* score, const int use_score, __global uchar* taken, const int cap,
                            const int lo, const int hi, const int count) {
  __local int hist[256];
  __local ulong sel_prefix, sel_mask;
  __local int sel_need, sel_done;
  const int lid = get_local_id(0), lsz = get_local_size(0);
  const size_t row = (size_t)get_group_id(1) * cap;
  score += row;
  taken += row;
  // No return before a barrier, even a uniform one: PoCL 3.1 on the CPU then ran the final loop
  // for items past hi. The loop's one exit is at its head, on a value every item read from local
  // memory (count <= 0 marks nothing).
  ulong prefix = 0, mask = 0;
  int need = count, done = 0;
  for (int shift = 56; shift >= 0 && !done; shift -= 8) {
    for (int i = lid; i < 256; i += lsz) hist[i] = 0;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int j = lo + lid; j < hi; j += lsz) {
      if (taken[j]) continue;
      const ulong key = choice_key(score, use_score, j);
      if ((key & mask) == prefix) atomic_inc(&hist[(key >> shift) & 255]);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    if (lid == 0) {
      int d = 255, above = 0;
      while (d > 0 && above + hist[d] < need) above += hist[d--];
      sel_need = need - above;
      sel_done = hist[d] <= sel_need;  // all of digit d's candidates are needed (or too few exist)
      sel_prefix = prefix | ((ulong)d << shift);
      sel_mask = mask | ((ulong)255 << shift);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    prefix = sel_prefix;
    mask = sel_mask;
    need = sel_need;
    done = sel_done;
  }
  for (int j = lo + lid; j < hi && count > 0; j += lsz)
    if (!taken[j] && (choice_key(score, use_score, j) & mask) >= prefix) taken[j] = 1;
}

// The taken slots of each group's row in ascending order (a work-group prefix sum of the marks),
// written to survivors[l][h][0..keep) of every member (l, h) of the group.
__kernel void pot_collect(__global const uchar* taken, const int cap, const int n, const int keep,
                          __global int* survivors, const int n_heads, const int head_groups, const int members_l,
                          const int members_h, __local int* scan) {
  const int lid = get_local_id(0), lsz = get_local_size(0), g = get_group_id(1);
  taken += (size_t)g * cap;
  int c0, c1;
  chunk_of(0, n, lid, lsz, &c0, &c1);
  int mine = 0;
  for (int j = c0; j < c1; ++j) mine += taken[j];
  scan[lid] = mine;
  WG_SCAN(SUM, 0, 0)
  int pos = scan[lid] - mine;
  const size_t row0 = group_row(g, head_groups, members_l, members_h, n_heads, keep);
  for (int j = c0; j < c1 && pos < keep; ++j) {
    if (!taken[j]) continue;
    for (int l = 0; l < members_l; ++l)
      for (int h = 0; h < members_h; ++h) survivors[row0 + ((size_t)l * n_heads + h) * keep + pos] = j;
    ++pos;
  }
}
