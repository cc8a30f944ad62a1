// Element-wise ops (needs activations.cl for silu, gelu_tanh).

// SwiGLU: act[r][i] = silu(gu[r][i]) * gu[r][n_ff + i]
//   gu: [n_rows][2*n_ff] (gate | up, from one fused GEMM)   act: [n_rows][n_ff]
__kernel void swiglu(__global const float* gu, const int n_ff, __global float* act) {
  const int i = get_global_id(0);
  const int r = get_global_id(1);
  if (i >= n_ff) return;
  const float g = gu[(size_t)r * 2 * n_ff + i];
  const float u = gu[(size_t)r * 2 * n_ff + n_ff + i];
  act[(size_t)r * n_ff + i] = silu(g) * u;
}


// GEGLU with the tanh form of GELU (Gemma): act[r][i] = gelu(gu[r][i]) * gu[r][n_ff + i],
//   gelu(g) = 0.5 g (1 + tanh(sqrt(2/pi) (g + 0.044715 g^3)))
//   gu: [n_rows][2*n_ff] (gate | up)   act: [n_rows][n_ff]
__kernel void geglu_tanh(__global const float* gu, const int n_ff, __global float* act) {
  const int i = get_global_id(0);
  const int r = get_global_id(1);
  if (i >= n_ff) return;
  const float g = gu[(size_t)r * 2 * n_ff + i];
  const float u = gu[(size_t)r * 2 * n_ff + n_ff + i];
  act[(size_t)r * n_ff + i] = gelu_tanh(g) * u;
}

// x[i] *= s for i < n (Gemma scales its embeddings by sqrt(n_embd)).
__kernel void scale(__global float* x, const int n, const float s) {
  const int i = get_global_id(0);
  if (i < n) x[i] *= s;
}

// x[r][c] += bias[c] for c < n_cols: a product's biases (Qwen2's q|k|v), over rows of stride ld.
// Launch: global (n_cols, n_rows).
__kernel void add_bias(__global float* x, const int ld, const int n_cols, __global const float* bias) {
  const int c = get_global_id(0), r = get_global_id(1);
  if (c < n_cols) x[(size_t)r * ld + c] += bias[c];
}
