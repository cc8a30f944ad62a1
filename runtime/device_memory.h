// One device-memory allocator, one budget. Every device buffer (weights, KV pot,
// activations, scratch, GEMM temporaries) is allocated here and counted per category.
// The budget is a hard cap: a plan that does not fit is refused before anything is
// allocated, with the need per category and the minimum that would work.
#pragma once
#include <CL/cl.h>
#include <array>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <nlohmann/json.hpp>
#include "runtime/cl_handles.h"

namespace infinipot::cl {

// KvSelection: the buffers that score, select and compact a KV store's entries (attention
// mass, survivor and position-delta lists, the compaction copy), apart from the K/V (kv_cache).
enum class MemCategory { Weights = 0, KvCache, Activations, Scratch, Gemm, KvSelection, kCount };
const char* category_name(MemCategory c);
constexpr size_t kNumCategories = static_cast<size_t>(MemCategory::kCount);

// A plan or an allocation over the budget (the {device_mem} setting): what the budget is
// (have) and the least that works (need), in bytes.
class BudgetError : public std::runtime_error {
 public:
  BudgetError(const std::string& msg, uint64_t minimum, uint64_t budget)
      : std::runtime_error(msg), minimum_(minimum), budget_(budget) {}
  uint64_t minimum_bytes() const { return minimum_; }
  uint64_t budget_bytes() const { return budget_; }

 private:
  uint64_t minimum_, budget_;
};

// What a run will need, by category, computed before allocating.
struct MemoryPlan {
  std::array<uint64_t, kNumCategories> bytes{};
  uint64_t& operator[](MemCategory c) { return bytes[static_cast<size_t>(c)]; }
  uint64_t operator[](MemCategory c) const { return bytes[static_cast<size_t>(c)]; }
  uint64_t total() const;
  std::string describe() const;  // "weights 81.2 MiB, kv_cache 45.0 MiB, ..."
};

struct MemoryAccounts {
  uint64_t budget = 0;
  std::array<uint64_t, kNumCategories> used{};
  std::array<uint64_t, kNumCategories> peak{};
  uint64_t used_total = 0;
  uint64_t peak_total = 0;
};

class DeviceMemory;

// A device buffer owned by the allocator's accounting; freeing returns its bytes.
class Buffer {
 public:
  Buffer() = default;
  Buffer(Buffer&&) noexcept = default;
  Buffer& operator=(Buffer&& o) noexcept;
  ~Buffer();
  cl_mem get() const { return mem_.get(); }
  size_t bytes() const { return bytes_; }
  MemCategory category() const { return category_; }
  explicit operator bool() const { return static_cast<bool>(mem_); }

 private:
  friend class DeviceMemory;
  void release() noexcept;
  MemHandle mem_;
  size_t bytes_ = 0;
  MemCategory category_ = MemCategory::Scratch;
  std::shared_ptr<MemoryAccounts> accounts_;
};

class DeviceMemory {
 public:
  DeviceMemory(cl_context ctx, uint64_t budget_bytes, uint64_t max_alloc_bytes);
  // Throws BudgetError if the plan exceeds the budget (nothing is allocated).
  void check_plan(const MemoryPlan& plan, const std::string& hint) const;
  // Allocates or throws BudgetError (over budget) / ClError (driver refused). in_host_memory:
  // CL_MEM_ALLOC_HOST_PTR, memory the host can map without a copy (where the device shares
  // the host's DRAM); counted like any other buffer.
  Buffer alloc(MemCategory cat, size_t bytes, const std::string& label, bool in_host_memory = false);
  uint64_t budget() const { return accounts_->budget; }
  uint64_t used_total() const { return accounts_->used_total; }
  uint64_t peak_total() const { return accounts_->peak_total; }
  uint64_t used(MemCategory c) const { return accounts_->used[static_cast<size_t>(c)]; }
  uint64_t peak(MemCategory c) const { return accounts_->peak[static_cast<size_t>(c)]; }
  nlohmann::json report() const;  // {"budget":..,"peak":..,"used":..,"by_category":{...}}

 private:
  cl_context ctx_;
  uint64_t max_alloc_;
  std::shared_ptr<MemoryAccounts> accounts_;
};

// "256M", "1.5G", "512K", "1048576", "2GiB" -> bytes. Throws std::invalid_argument with a
// message naming the text and the accepted forms.
uint64_t parse_byte_size(const std::string& text);
std::string format_bytes(uint64_t bytes);  // "81.2 MiB"

}  // namespace infinipot::cl
