// Horizontal reductions of a float16 to one float, shared by the kernels that keep 16-lane
// accumulators (matvec.cl, attention.cl, cross_entropy.cl; the host prepends this file):
// one definition, so every kernel that sums 16 lanes adds them in the same order (halves,
// then quarters, then pairs).
inline float sum16(const float16 v) {
  const float8 a = v.lo + v.hi;
  const float4 b = a.lo + a.hi;
  return (b.x + b.y) + (b.z + b.w);
}

inline float max16(const float16 v) {
  const float8 a = fmax(v.lo, v.hi);
  const float4 b = fmax(a.lo, a.hi);
  return fmax(fmax(b.x, b.y), fmax(b.z, b.w));
}
