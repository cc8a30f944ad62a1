#include "pot/device_choice.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "runtime/cl_error.h"

namespace infinipot {
namespace {

constexpr const char* kFile = "pot_select.cl";
constexpr size_t kDefaultWorkGroup = 256;  // items per row kernel unless the caller or the kernel says less
constexpr size_t kBytesPerSlot = 3 * sizeof(float) + 2 * sizeof(int) + 1;

// floor(log2(x)) for x >= 1.
int floor_log2(long long x) {
  int k = 0;
  while (x >>= 1) ++k;
  return k;
}

void need_buffer(const cl::Buffer* b, size_t bytes, const std::string& what) {
  if (!b || !*b) throw cl::ClError("invalid launch: DeviceChoice " + what + " is missing");
  if (b->bytes() < bytes)
    throw cl::ClError("invalid launch: DeviceChoice " + what + " holds " + std::to_string(b->bytes()) +
                      " bytes, needs " + std::to_string(bytes));
}

}  // namespace

int DeviceChoice::n_groups(int n_layers, int n_heads, const ChoiceShape& shape) {
  return (shape.per_layer ? n_layers : 1) * (shape.per_head ? n_heads : 1);
}

size_t DeviceChoice::bytes_needed(int n_layers, int n_heads, int capacity, const ChoiceShape& shape) {
  return size_t(n_groups(n_layers, n_heads, shape)) * size_t(std::max(capacity, 0)) * kBytesPerSlot;
}

DeviceChoice::DeviceChoice(cl::Context& ctx, int n_layers, int n_heads, int capacity, const ChoiceShape& shape,
                           int work_group)
    : ctx_(ctx), groups_(n_groups(n_layers, n_heads, shape)), capacity_(capacity), work_group_(work_group) {
  if (n_layers <= 0 || n_heads <= 0 || capacity <= 0 || work_group < 0)
    throw std::invalid_argument("DeviceChoice: need n_layers, n_heads, capacity > 0 and work_group >= 0 (got " +
                                std::to_string(n_layers) + ", " + std::to_string(n_heads) + ", " +
                                std::to_string(capacity) + ", " + std::to_string(work_group) + ")");
  const size_t slots = size_t(groups_) * capacity_;
  auto alloc = [&](size_t bytes, const char* label) { return ctx_.memory().alloc(cl::MemCategory::KvSelection, bytes, label); };
  level_a_ = alloc(slots * sizeof(float), "pot choice sums");
  level_b_ = alloc(slots * sizeof(float), "pot choice spread levels");
  spread_ = alloc(slots * sizeof(float), "pot choice spread");
  win_lo_ = alloc(slots * sizeof(int), "pot choice window starts");
  win_hi_ = alloc(slots * sizeof(int), "pot choice window ends");
  taken_ = alloc(slots, "pot choice taken");
}

size_t DeviceChoice::local_size(const cl::Kernel& k) const {
  size_t max_items = 0;
  cl_ulong kernel_local = 0;
  const cl_device_id dev = ctx_.device().id;
  cl::check(clGetKernelWorkGroupInfo(k.get(), dev, CL_KERNEL_WORK_GROUP_SIZE, sizeof max_items, &max_items, nullptr),
            "clGetKernelWorkGroupInfo(" + k.name() + ", CL_KERNEL_WORK_GROUP_SIZE)");
  cl::check(clGetKernelWorkGroupInfo(k.get(), dev, CL_KERNEL_LOCAL_MEM_SIZE, sizeof kernel_local, &kernel_local,
                                     nullptr),
            "clGetKernelWorkGroupInfo(" + k.name() + ", CL_KERNEL_LOCAL_MEM_SIZE)");
  // The scan scratch takes one int per item, beside the kernel's own local memory.
  const uint64_t local_mem = ctx_.device().local_mem_bytes;
  const size_t by_local = local_mem > kernel_local ? size_t((local_mem - kernel_local) / sizeof(int)) : 1;
  const size_t want = work_group_ > 0 ? size_t(work_group_) : kDefaultWorkGroup;
  return std::max<size_t>(1, std::min({want, max_items, by_local}));
}

// The spread window of every slot of [lo, hi) of each group into win_lo_/win_hi_. Returns the
// longest a window can be: the row, or without units back + 1 + fwd.
int DeviceChoice::windows(const cl::Buffer* unit, const Grouping& gr, int groups, int lo, int hi, int back, int fwd,
                          int cap) {
  if (lo >= hi) return 0;
  if (unit) {
    cl::Kernel k = ctx_.kernel(kFile, "pot_spread_runs");
    const size_t local = local_size(k);
    k.args(*unit, gr.stride, gr.n_heads, gr.head_groups, gr.members_l, gr.members_h, lo, hi, back, fwd, win_lo_,
           win_hi_, cap, cl::LocalBytes{local * sizeof(int)})
        .launch(ctx_.queue(), {local, size_t(groups)}, {local, 1});
  } else {
    ctx_.kernel(kFile, "pot_spread_windows")
        .args(lo, hi, back, fwd, win_lo_, win_hi_, cap)
        .launch(ctx_.queue(), {size_t(hi - lo), size_t(groups)});
  }
  long long longest = hi - lo;
  if (!unit) longest = std::min(longest, static_cast<long long>(back) + fwd + 1);
  return static_cast<int>(longest);
}

// out[g][j] for j in [lo, hi) = the maximum of level_a_[g] over j's window (windows() first).
// level_a_ is overwritten: the sparse table's levels alternate between it and level_b_.
void DeviceChoice::spread_levels(int groups, int lo, int hi, int longest, int cap, cl::Buffer& out) {
  if (lo >= hi) return;
  const int levels = floor_log2(longest) + 1;
  cl::Kernel k = ctx_.kernel(kFile, "pot_spread_level");
  cl::Buffer* cur = &level_a_;
  cl::Buffer* next = &level_b_;
  for (int level = 0; level < levels; ++level) {
    k.args(*cur, *next, out, win_lo_, win_hi_, cap, lo, hi, level, int(level + 1 < levels))
        .launch(ctx_.queue(), {size_t(hi - lo), size_t(groups)});
    std::swap(cur, next);
  }
}

void DeviceChoice::take_rows(const cl::Buffer& score, bool use_score, cl::Buffer& taken, int groups, int cap, int lo,
                             int hi, int count) {
  if (count <= 0 || lo >= hi) return;
  cl::Kernel k = ctx_.kernel(kFile, "pot_take_best");
  const size_t local = local_size(k);
  k.args(use_score ? score.get() : cl_mem{nullptr}, int(use_score), taken, cap, lo, hi, count)
      .launch(ctx_.queue(), {local, size_t(groups)}, {local, 1});
}

void DeviceChoice::choose(const DeviceScores& s, const std::vector<DeviceStage>& stages, const ChoiceShape& shape,
                          cl::Buffer& survivors) {
  // The host's checks, in the host's words.
  if (s.n_layers <= 0 || s.n_heads <= 0 || s.size < 0 || s.stride < s.size)
    throw std::invalid_argument("DeviceChoice::choose: bad shape");
  if (s.pinned < 0 || s.pinned > s.keep || s.keep > s.size)
    throw std::invalid_argument("DeviceChoice::choose: need 0 <= pinned (" + std::to_string(s.pinned) + ") <= keep (" +
                                std::to_string(s.keep) + ") <= size (" + std::to_string(s.size) + ")");
  if (shape.head < 0 || shape.recent < 0 || shape.back < 0 || shape.fwd < 0)
    throw std::invalid_argument("DeviceChoice::choose: negative window");
  for (const auto& st : stages)
    if (!st.score || st.count < 0) throw std::invalid_argument("DeviceChoice::choose: a stage without scores");
  // The device's: the scratch and the buffers must hold the choice.
  const int L = s.n_layers, H = s.n_heads, n = s.size, groups = n_groups(L, H, shape);
  if (groups > groups_ || n > capacity_)
    throw cl::ClError("invalid launch: DeviceChoice::choose over " + std::to_string(groups) + " groups of " +
                      std::to_string(n) + " slots; the scratch holds " + std::to_string(groups_) + " of " +
                      std::to_string(capacity_));
  const size_t rows = size_t(L) * H, row_bytes = size_t(s.stride) * sizeof(float);
  for (size_t k = 0; k < stages.size(); ++k)
    need_buffer(stages[k].score, rows * row_bytes, "stage " + std::to_string(k) + " scores");
  const bool has_units = shape.units && s.unit;
  if (has_units) need_buffer(s.unit, rows * row_bytes, "units");
  if (s.keep == 0) return;
  need_buffer(&survivors, rows * s.keep * sizeof(int), "survivors");

  const Grouping gr{H, s.stride, shape.per_head ? H : 1, shape.per_layer ? 1 : L, shape.per_head ? 1 : H};
  // How many places each step fills is the same for every group, so the host counts them.
  // The outright keeps: the pinned prefix, `head` after it, the `recent` newest (some of which
  // may lie in the prefix or the head).
  int free_places = s.keep - s.pinned;
  const int head = std::min(shape.head, free_places);
  free_places -= head;
  const int recent = std::min(shape.recent, free_places);
  free_places -= std::max(0, n - std::max(n - recent, s.pinned + head));
  ctx_.kernel(kFile, "pot_mark_keeps")
      .args(taken_, capacity_, n, s.pinned + head, n - recent)
      .launch(ctx_.queue(), {size_t(n), size_t(groups)});

  // Stage by stage: sum over the group, spread, take the best. A stage takes exactly what it
  // asks for: at least keep - (taken so far) >= its count slots are free, since keep <= size.
  int longest = -1;  // the windows, once the first stage runs
  for (size_t k = 0; k < stages.size() && free_places > 0; ++k) {
    const int want = k + 1 == stages.size() ? free_places : std::min(stages[k].count, free_places);
    if (want == 0) continue;
    if (longest < 0)
      longest = windows(has_units ? s.unit : nullptr, gr, groups, s.pinned, n, shape.back, shape.fwd, capacity_);
    ctx_.kernel(kFile, "pot_group_sum")
        .args(*stages[k].score, s.stride, H, gr.head_groups, gr.members_l, gr.members_h, n, level_a_, capacity_)
        .launch(ctx_.queue(), {size_t(n), size_t(groups)});
    spread_levels(groups, s.pinned, n, longest, capacity_, spread_);
    take_rows(spread_, true, taken_, groups, capacity_, s.pinned, n, want);
    free_places -= want;
  }
  // Without stages (or if they ran dry) the newest free entries fill what is left: the best by
  // slot alone.
  take_rows(spread_, false, taken_, groups, capacity_, 0, n, free_places);

  cl::Kernel collect = ctx_.kernel(kFile, "pot_collect");
  const size_t local = local_size(collect);
  collect
      .args(taken_, capacity_, n, s.keep, survivors, H, gr.head_groups, gr.members_l, gr.members_h,
            cl::LocalBytes{local * sizeof(int)})
      .launch(ctx_.queue(), {local, size_t(groups)}, {local, 1});
}

void DeviceChoice::spread(const cl::Buffer& in, const cl::Buffer* unit, int lo, int hi, int back, int fwd,
                          cl::Buffer& out) {
  if (lo < 0 || lo > hi || back < 0 || fwd < 0)
    throw std::invalid_argument("DeviceChoice::spread: need 0 <= lo <= hi and back, fwd >= 0");
  if (hi > capacity_)
    throw cl::ClError("invalid launch: DeviceChoice::spread over " + std::to_string(hi) + " slots; the scratch holds " +
                      std::to_string(capacity_));
  const size_t bytes = size_t(hi) * sizeof(float);
  need_buffer(&in, bytes, "spread input");
  need_buffer(&out, bytes, "spread output");
  if (unit) need_buffer(unit, bytes, "units");
  ctx_.copy(in, level_a_, bytes);
  spread_levels(1, lo, hi, windows(unit, Grouping{}, 1, lo, hi, back, fwd, capacity_), capacity_, out);
}

void DeviceChoice::take_best(const cl::Buffer& score, int lo, int hi, int count, cl::Buffer& taken) {
  if (lo < 0 || lo > hi || count < 0)
    throw std::invalid_argument("DeviceChoice::take_best: need 0 <= lo <= hi and count >= 0");
  need_buffer(&score, size_t(hi) * sizeof(float), "take_best scores");
  need_buffer(&taken, size_t(hi), "take_best marks");
  take_rows(score, true, taken, 1, 0, lo, hi, count);
}

}  // namespace infinipot
