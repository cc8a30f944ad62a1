// Element-wise ops.

// SwiGLU: act[r][i] = silu(gu[r][i]) * gu[r][n_ff + i]
//   gu: [n_rows][2*n_ff] (gate | up, from one fused GEMM)   act: [n_rows][n_ff]
__kernel void swiglu(__global const float* gu, const int n_ff, __global float* act) {
  const int i = get_global_id(0);
  const int r = get_global_id(1);
  if (i >= n_ff) return;
  const float g = gu[(size_t)r * 2 * n_ff + i];
  const float u = gu[(size_t)r * 2 * n_ff + n_ff + i];
  act[(size_t)r * n_ff + i] = g / (1.0f + exp(-g)) * u;
}

