// Launcher of cl_kernels/decode_layer.cl (a decode row's transformer block in one launch);
// reference: the block composed of the CPU references, and the five launches it replaces, in
// tests/runtime/test_decode_layer.cpp.
#pragma once
#include "runtime/ops/attention.h"
#include "runtime/ops/device_weight.h"
#include "runtime/ops/matvec.h"

namespace infinipot::ops {

// decode_layer.cl: a decode row's transformer block in one launch (x += Wo . attention(...),
// then x += Wd . GLU(...); Forward::layer's five steps, the same arithmetic as their launches
// in the native dot and attention_decode_lanes_group). sync: kDecodeLayerSyncInts ints, zero before
// the first launch (each launch leaves them zero). Call only where decode_layer_supported.
struct DecodeLayer {
  const DeviceWeight* wqkv;              // [(n_head + 2 n_kv) head_dim][n_embd]
  const DeviceWeight* wo;                // [n_embd][n_head head_dim]
  const DeviceWeight* gate;              // rows [0, n_ff) are gate rows
  const DeviceWeight* up;                // rows [up_row0, up_row0 + n_ff) are up rows
  int up_row0, n_ff;
  const DeviceWeight* down;              // [n_embd][n_ff]
  const Buffer* attn_norm;               // [n_embd]
  const Buffer* ffn_norm;                // [n_embd]
  float eps;
  Glu act;
  int n_rot;
  const Buffer* cs;                      // [n_rot / 2] (cos, sin) of the row's position
};
bool decode_layer_supported(const Context& c, const AttentionShape& s, const DecodeLayer& L);
void decode_layer(Context& c, const AttentionShape& s, const DecodeLayer& L, Buffer& x, Buffer& qkv,
                  Buffer& k_cache, Buffer& v_cache, int n_past, Buffer& attn, Buffer& lse, Buffer& act,
                  const DecodeSplit& split, Buffer& sync);
constexpr int kDecodeLayerSyncInts = 13;  // 2 for each of its 6 steps, and the exit count

}  // namespace infinipot::ops
