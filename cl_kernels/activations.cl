// GLU activations, shared by elementwise.cl (the unfused swiglu / geglu_tanh) and matvec.cl
// (the fused decode gate|up product): one definition, so both paths round alike.

// SiLU: g * sigmoid(g)
inline float silu(const float g) { return g / (1.0f + exp(-g)); }

// GELU with the tanh approximation (Gemma): 0.5 g (1 + tanh(sqrt(2/pi) (g + 0.044715 g^3)))
inline float gelu_tanh(const float g) {
  const float inner = 0.7978845608028654f * (g + 0.044715f * g * g * g);
  return 0.5f * g * (1.0f + tanh(inner));
}
