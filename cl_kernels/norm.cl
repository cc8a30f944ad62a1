// RMSNorm: out[r][i] = x[r][i] / sqrt(mean_i(x[r][i]^2) + eps) * w[i]
//   rms_norm:       x, out: [n_rows][n] float (may alias)   w: [n] float
//                   -DACCUM: out[r][i] += ... instead (a post-norm fused with the residual
//                   add; x and out must not alias)
//   rms_norm_heads: in place on n_heads heads of head_dim floats per row of a wider buffer:
//                   x[t][off + h*n + i] for t < n_tokens, h < n_heads (QK-norm on fused q|k|v)
// One work-group of LOCAL (-D, power of two) work-items per row; LOCAL=1 suits CPU drivers
// that run a work-group as one loop.
#ifndef LOCAL
#define LOCAL 64
#endif

// One row by one work-group; `partial` is LOCAL floats of local memory.
inline void rms_row(__global const float* xr, __global const float* w, __global float* outr, const int n,
                    const float eps, __local float* partial) {
  const int l = get_local_id(0);
  float sum = 0.0f;
  for (int i = l; i < n; i += LOCAL) sum += xr[i] * xr[i];
#if LOCAL > 1
  partial[l] = sum;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int s = LOCAL / 2; s > 0; s >>= 1) {
    if (l < s) partial[l] += partial[l + s];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  sum = partial[0];
#endif
  const float scale = rsqrt(sum / (float)n + eps);
#ifdef ACCUM
  for (int i = l; i < n; i += LOCAL) outr[i] += xr[i] * scale * w[i];
#else
  for (int i = l; i < n; i += LOCAL) outr[i] = xr[i] * scale * w[i];
#endif
}

__kernel void rms_norm(__global const float* x, __global const float* w, __global float* out, const int n,
                       const float eps) {
  __local float partial[LOCAL];
  const int r = get_group_id(0);
  rms_row(x + (size_t)r * n, w, out + (size_t)r * n, n, eps, partial);
}

__kernel void rms_norm_heads(__global float* x, const int ld, const int off, const int n_heads,
                             __global const float* w, const int n, const float eps) {
  __local float partial[LOCAL];
  const int r = get_group_id(0);
  __global float* xr = x + (size_t)(r / n_heads) * ld + off + (r % n_heads) * n;
  rms_row(xr, w, xr, n, eps, partial);
}
