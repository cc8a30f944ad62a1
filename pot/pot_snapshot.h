// A memory pot saved after reading a document (`run --save-pot FILE`), to answer questions
// about it later without reading it again (`run --load-pot FILE -q QUESTION`). Host-side
// format and checks only (no OpenCL: the parser is fuzzed); MemoryPot::capture/restore move
// the state to and from the device.
//
// File layout (little-endian):
//   "IPOTSNAP" | u32 version (2) | u32 0 | u64 header bytes | header (JSON text)
//   | sections, in the order and sizes the header's "sections" lists
//   | u64 checksum (64-bit FNV-1a over every byte before it)
// The header holds the model's identity, the pot's settings and shape, and the scalars of its
// state; the sections hold the per-slot arrays, the tokens read and the K/V of the filled slots.
// Version 2 adds what a model with sliding-window layers (gemma3) needs to read on exactly:
// the kind of every model layer ("layer_kinds"), the local store's scalars ("window") and the
// K/V of its filled slots (section "window_kv", empty without local layers). Version 1 files
// (llama: every layer global, no local store) are still read.
#pragma once
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>
#include <nlohmann/json.hpp>

namespace infinipot {

struct PotSnapshot {
  // What it belongs to: a snapshot is refused for another model or other pot settings.
  std::string model_id;       // the model's identity (Engine::model_id: size + hash of its tensors)
  nlohmann::json settings;    // policy, capacity, keep, params, cr_rope, cap_question_rows
  // Shape. n_layer: the pot's layers, i.e. the model's global-attention layers (all of llama's).
  int n_layer = 0, n_head_kv = 0, head_dim = 0, capacity = 0;
  // Every model layer's attention kind, 'G' global or 'L' sliding-window (version 1: all 'G').
  std::string layer_kinds;
  bool half = false;          // K/V stored as fp16
  // State scalars.
  int size = 0;               // filled slots (every layer and head)
  int next_position = 0;      // RoPE position of the next token
  int pinned = 0, stream_pos = 0, last_token = -1, last_unit = -1;
  float pending_nuc = 0;
  int cycles = 0, max_position = 0;
  long long tokens_read = 0;
  // What the distillations kept (--keep auto varies it; absent before it: 0).
  long long kept_total = 0;
  int kept_least = 0, kept_most = 0;
  // Per slot, [n_layer][n_head_kv][capacity].
  std::vector<float> nuc, acc;            // acc empty unless the policy accumulates (H2O)
  std::vector<int> source, unit, position;
  std::vector<float> mass;                // H2O's attention since the last cycle (device copy); else empty
  std::vector<int> tokens;                // the stream read: chat prefix + document
  // K/V of slots [0, size): per layer, keys then values, each [n_head_kv][size][head_dim] of
  // 2 (half) or 4 bytes.
  std::vector<uint8_t> kv;
  // The sliding-window layers' store (Forward::window_store; all 0 and empty without one):
  // one layer per 'L' of layer_kinds, window_capacity slots each (sliding_window + the chunk
  // of the run that saved it), slots [0, window_size) filled; slot == position there, so
  // window_next_position == window_size.
  int window_capacity = 0, window_size = 0, window_next_position = 0;
  // K/V of its slots [0, window_size): per local layer, keys then values, each
  // [n_head_kv][window_size][head_dim], element size as kv's.
  std::vector<uint8_t> window_kv;

  size_t slots() const { return size_t(n_layer) * n_head_kv * capacity; }
  size_t kv_bytes() const { return size_t(n_layer) * 2 * n_head_kv * size * head_dim * (half ? 2 : 4); }
  int window_layers() const { return static_cast<int>(std::count(layer_kinds.begin(), layer_kinds.end(), 'L')); }
  size_t window_kv_bytes() const {
    return size_t(window_layers()) * 2 * n_head_kv * window_size * head_dim * (half ? 2 : 4);
  }
};

std::vector<uint8_t> serialize_pot_snapshot(const PotSnapshot& s);
// Checks everything (magic, version, header fields and ranges, layer kinds against the
// shape, section sizes against the shape, checksum, no trailing bytes); throws std::invalid_argument naming `what` and the
// problem. Never reads out of bounds.
PotSnapshot parse_pot_snapshot(const uint8_t* data, size_t n, const std::string& what);

void write_pot_snapshot(const std::string& path, const PotSnapshot& s);  // whole file or an error
PotSnapshot read_pot_snapshot(const std::string& path);

uint64_t fnv1a64(const uint8_t* data, size_t n, uint64_t h = 1469598103934665603ull);

}  // namespace infinipot
