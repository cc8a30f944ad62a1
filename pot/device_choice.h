// The memory pot's choice of survivors on the device: choose_survivors (pot/selection.h) run by
// the kernels of cl_kernels/pot_select.cl, with the same result bit for bit, so the scores need
// not come back to the host; only the [n_layers][n_heads][keep] survivor list exists, on the
// device, for the compaction to read (ctx.read it when the host wants it).
//
// Per choice, for every group at once: mark the outright keeps; once, the spread windows (unit
// runs by work-group scans); per stage, the group sums, the spread (a sparse table one level per
// launch, O(n log window)), and a radix select of the best free slots; then the ascending list.
// The counts (how many each stage takes, the final fill) are the same for every group and come
// from the host; nothing is read back.
//
// Scratch (KvSelection), per group and slot of capacity: three float rows (sums and spread
// levels), two int rows (window bounds) and one byte (taken): 21 bytes.
#pragma once
#include <vector>

#include "pot/selection.h"
#include "runtime/context.h"

namespace infinipot {

// PotScores with the arrays on the device: [n_layers][n_heads][stride] floats (ints for source
// and unit); a measurement not taken is null.
struct DeviceScores {
  int n_layers = 0, n_heads = 0, stride = 0;
  int size = 0;    // filled slots
  int pinned = 0;  // slots [0, pinned): always kept
  int keep = 0;    // survivors per (layer, head), pinned included
  const cl::Buffer* catalyst = nullptr;
  const cl::Buffer* novelty = nullptr;
  const cl::Buffer* accumulated = nullptr;
  const cl::Buffer* last_query = nullptr;
  const cl::Buffer* source = nullptr;
  const cl::Buffer* unit = nullptr;  // word / digit run of each slot (equal values, adjacent slots)
};

struct DeviceStage {
  const cl::Buffer* score = nullptr;  // [n_layers][n_heads][stride] floats
  int count = 0;                      // places this stage fills; the last stage fills what is left
};

class DeviceChoice {
 public:
  // Device bytes the scratch takes for choices over [n_layers][n_heads] rows of up to `capacity`
  // slots grouped as `shape` says (per_layer, per_head); the pot adds it to its plan.
  static size_t bytes_needed(int n_layers, int n_heads, int capacity, const ChoiceShape& shape);
  static int n_groups(int n_layers, int n_heads, const ChoiceShape& shape);

  // Allocates the scratch (KvSelection). work_group: items per work-group of the row kernels; 0
  // picks one, anything larger than a kernel allows is lowered to what it allows.
  DeviceChoice(cl::Context& ctx, int n_layers, int n_heads, int capacity, const ChoiceShape& shape,
               int work_group = 0);
  DeviceChoice(const DeviceChoice&) = delete;
  DeviceChoice& operator=(const DeviceChoice&) = delete;

  // choose_survivors on the device: survivors gets [n_layers][n_heads][keep] ints, each list
  // ascending. Throws std::invalid_argument where the host would, cl::ClError ("invalid launch")
  // for buffers too small or a choice larger than the scratch.
  void choose(const DeviceScores& s, const std::vector<DeviceStage>& stages, const ChoiceShape& shape,
              cl::Buffer& survivors);

  // The steps on one row, like the host's spread_scores and take_best (for tests).
  //   in, out: [hi] floats; unit: [hi] ints or null; only out[lo, hi) is written.
  void spread(const cl::Buffer& in, const cl::Buffer* unit, int lo, int hi, int back, int fwd, cl::Buffer& out);
  //   score: [hi] floats; taken: [hi] bytes (0 free, 1 taken), the count best free of [lo, hi) marked.
  void take_best(const cl::Buffer& score, int lo, int hi, int count, cl::Buffer& taken);

 private:
  // Where the rows of a group start in [n_layers][n_heads][stride] (see pot_select.cl).
  struct Grouping {
    int n_heads = 1, stride = 0, head_groups = 1, members_l = 1, members_h = 1;
  };
  size_t local_size(const cl::Kernel& k) const;
  int windows(const cl::Buffer* unit, const Grouping& gr, int groups, int lo, int hi, int back, int fwd, int cap);
  void spread_levels(int groups, int lo, int hi, int longest, int cap, cl::Buffer& out);
  void take_rows(const cl::Buffer& score, bool use_score, cl::Buffer& taken, int groups, int cap, int lo, int hi,
                 int count);

  cl::Context& ctx_;
  int groups_, capacity_, work_group_;
  cl::Buffer level_a_, level_b_, spread_;  // [groups][capacity] floats: sums / sparse-table levels / spread
  cl::Buffer win_lo_, win_hi_;             // [groups][capacity] ints
  cl::Buffer taken_;                       // [groups][capacity] bytes
};

}  // namespace infinipot
