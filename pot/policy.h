// A pot policy decides which KV entries survive a distillation. Each policy is one small file
// in pot/policies/ (kvpress's "presses"): it declares what the pot must measure for it
// (PolicyNeeds), then chooses survivors from those measurements (select). The pot runs one
// pipeline for all of them: measure, select, compact, re-rotate (CR-RoPE). The registry
// (pot/policy_registry.h) is the only place that knows the policies by name.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "pot/word_runs.h"

namespace infinipot {

// What the pot measures for a policy. Everything it measures is per (layer, KV head, slot).
struct PolicyNeeds {
  bool catalyst = false;     // CaP: attention the catalyst prompt pays each entry (one pass per cycle)
  bool novelty = false;      // NuC: -log p(token | pot before it), scored as the token is read
  bool accumulated = false;  // H2O: attention every query since the entry was read paid it
  bool last_query = false;   // TOVA: attention the last token read pays each entry
};

// The settings that shape a policy's choice. -1: the policy's own default.
struct PolicyParams {
  float nuc_ratio = 0.5f;  // share of the free places chosen by NuC before CaP (infinipot)
  // NuC scores every nuc_stride-th token of the stream (the LM head multiplies those rows
  // only); the span rule (pool, pool_ahead, word runs) carries a score to the tokens between.
  int nuc_stride = 1;
  static constexpr int kMaxNucStride = 64;  // the span rule reaches a few slots: wider strides leave gaps
  int pool = -1;           // an entry takes the best score of the entries up to this many slots before it
  int pool_ahead = -1;     // ... and up to this many after it (and of the word/digit run it is in)
  int recent = -1;         // newest entries always kept (a window of the latest text)
  bool per_head = false;   // each KV head chooses its own entries (the paper) instead of the layer's heads together
  bool per_layer = false;  // each layer chooses its own entries instead of one choice for every layer
  UnitRule units = UnitRule::Word;  // what is kept or dropped together (pot/word_runs.h)
};

// The measurements at one distillation. Arrays are [n_layers][n_heads][stride]; a need the
// policy did not declare is null. Slots [0, size) are filled; they hold tokens in stream
// order within each (layer, head).
struct PotScores {
  int n_layers = 0, n_heads = 0, stride = 0;
  int size = 0;     // filled slots
  int pinned = 0;   // slots [0, pinned): the chat prefix (policies other than streaming/swa keep it)
  int keep = 0;     // survivors per (layer, head), pinned included
  const float* catalyst = nullptr;
  const float* novelty = nullptr;
  const float* accumulated = nullptr;
  const float* last_query = nullptr;
  const int* source = nullptr;  // stream index of the token in each slot
  // Stream index where the slot token's word or digit run starts ("29772" read as five digit
  // tokens is one run; " remember" split in two is one run). Equal values, adjacent slots.
  const int* unit = nullptr;
  // Diagnostics only (run --pot-oracle): entries whose stream index lies in [oracle_first,
  // oracle_last] are kept by every policy in every layer and head, outside its own choice.
  int oracle_first = -1, oracle_last = -1;
  size_t at(int layer, int head) const { return (size_t(layer) * n_heads + head) * stride; }
};

// How a choice is grouped and which entries it keeps outright (pot/selection.h runs it).
struct ChoiceShape {
  bool per_head = false;   // each KV head is its own group
  bool per_layer = true;   // each layer is its own group (false: one group over all layers)
  int head = 0;            // entries right after the pinned prefix always kept
  int recent = 0;          // newest entries always kept
  int back = 0, fwd = 0;   // spread window (slots before / after)
  bool units = false;      // widen the spread to whole word / digit runs
};

// A policy's choice as data: which measurement fills how many places, and the shape. The pot
// runs it on the device (pot/device_choice.h) or the host (choose_survivors, the reference).
enum class Measure { Catalyst, Novelty, Accumulated, LastQuery };
struct PlanStage {
  Measure measure;
  int count = 0;  // places this stage fills; the last stage fills what is left
};
struct ChoicePlan {
  std::vector<PlanStage> stages;
  ChoiceShape shape;
};

class PotPolicy {
 public:
  virtual ~PotPolicy() = default;
  virtual PolicyNeeds needs() const = 0;
  // Entries of the chat prefix (length prefix) the policy pins; most pin all of it.
  virtual int pinned(int prefix) const { return prefix; }
  // The choice for a pot of s.size entries keeping s.keep (only the counts of s are read).
  virtual ChoicePlan plan(const PotScores& s) const = 0;
  // [n_layers][n_heads][keep] surviving slots, strictly ascending per (layer, head): the plan
  // run on the host (pot/selection.cpp).
  std::vector<int> select(const PotScores& s) const;
};

}  // namespace infinipot
