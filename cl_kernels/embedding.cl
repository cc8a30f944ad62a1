// Token embedding lookup with dequantization (needs quant_formats.cl).
//   table: [n_vocab rows][row_bytes]   ids: [n]   out: [n][n_embd] float
// One work-item per (token, group of 8 features).
__kernel void embed_rows(__global const uchar* table, const int row_bytes, __global const int* ids,
                         const int n_embd, __global float* out) {
  const int g = get_global_id(0);
  const int t = get_global_id(1);
  if (g * 8 >= n_embd) return;
  __global const uchar* row = table + (size_t)ids[t] * row_bytes;
  vstore8(load8(row, g * 8, n_embd), 0, out + (size_t)t * n_embd + g * 8);
}
