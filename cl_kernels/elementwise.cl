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

// x[r][k] += sum_p parts[p][r][k] (in order of p): the split sums of a fused decode launch
// (matvec.cl DOWN_PARTS, attention.cl WO_PARTS) into the residual where no product reads them.
//   x: [n_rows][K]   parts: [n_parts][n_rows][K]
__kernel void add_parts(__global float* x, __global const float* parts, const int n_parts, const int n_rows,
                        const int K) {
  const int k = get_global_id(0);
  const int r = get_global_id(1);
  if (k >= K) return;
  float v = x[(size_t)r * K + k];
  for (int p = 0; p < n_parts; ++p) v += parts[((size_t)p * n_rows + r) * K + k];
  x[(size_t)r * K + k] = v;
}
