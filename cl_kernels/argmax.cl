// Greedy sampling on the device (needs vector_reduce.cl): the index of the first largest value
// of a row of logits, so a greedy decode step reads back one int instead of the vocabulary's
// floats. NaN never wins; a row of nothing but NaN gives 0 (runtime/sampling.cpp's argmax,
// the host reference, says the same).
//   x: [n] floats   out: [1] int
// One work-group of ARGMAX_ITEMS items: item t takes the contiguous chunk [t*chunk, (t+1)*chunk),
// finds its largest value 16 lanes at a time (fmax skips NaN) and then the first index holding
// it; the group merges the items' (value, index) pairs through local memory, ties going to the
// lower index. A CPU device runs the group on one thread, streaming the row once (plus the
// head of the chunk that holds the maximum, from the cache); the row is ~200 KB, a few us.
#define ARGMAX_NONE INT_MAX

__kernel void argmax_row(__global const float* x, const int n, const int chunk, __global int* out) {
  __local float best_v[ARGMAX_ITEMS];
  __local int best_i[ARGMAX_ITEMS];
  const int t = get_local_id(0);
  const int lo = min(n, t * chunk), hi = min(n, lo + chunk);
  float16 lanes = (float16)(-INFINITY);
  int j = lo;
  for (; j + 16 <= hi; j += 16) lanes = fmax(lanes, vload16(0, x + j));
  float m = max16(lanes);
  for (; j < hi; ++j) m = fmax(m, x[j]);
  int at = ARGMAX_NONE;  // a chunk of only NaN (or an empty one) offers nothing
  for (j = lo; j < hi; ++j)
    if (x[j] == m) {
      at = j;
      break;
    }
  best_v[t] = m;
  best_i[t] = at;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int s = ARGMAX_ITEMS / 2; s > 0; s >>= 1) {
    if (t < s) {
      const float v = best_v[t + s];
      const int i = best_i[t + s];
      const int a = best_i[t];
      if (i != ARGMAX_NONE && (a == ARGMAX_NONE || v > best_v[t] || (v == best_v[t] && i < a))) {
        best_v[t] = v;
        best_i[t] = i;
      }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (t == 0) out[0] = best_i[0] == ARGMAX_NONE ? 0 : best_i[0];
}
