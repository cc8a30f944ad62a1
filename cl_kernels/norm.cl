// RMSNorm: out[r][i] = x[r][i] / sqrt(mean_i(x[r][i]^2) + eps) * w[i]
//   x, out: [n_rows][n] float (may alias)   w: [n] float
// One work-group of LOCAL (-D, power of two) work-items per row; LOCAL=1 suits CPU drivers
// that run a work-group as one loop.
#ifndef LOCAL
#define LOCAL 64
#endif
__kernel void rms_norm(__global const float* x, __global const float* w, __global float* out, const int n,
                       const float eps) {
  const int r = get_group_id(0);
  const int l = get_local_id(0);
  __global const float* xr = x + (size_t)r * n;
  __global float* outr = out + (size_t)r * n;
  float sum = 0.0f;
  for (int i = l; i < n; i += LOCAL) sum += xr[i] * xr[i];
#if LOCAL > 1
  __local float partial[LOCAL];
  partial[l] = sum;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int s = LOCAL / 2; s > 0; s >>= 1) {
    if (l < s) partial[l] += partial[l + s];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  sum = partial[0];
#endif
  const float scale = rsqrt(sum / (float)n + eps);
  for (int i = l; i < n; i += LOCAL) outr[i] = xr[i] * scale * w[i];
}
