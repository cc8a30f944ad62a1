#include "runtime/device_memory.h"
#include "runtime/trace.h"

#include <cctype>
#include <cmath>
#include <cstdio>

#include "runtime/cl_error.h"
#include "runtime/fault_injection.h"

namespace infinipot::cl {

const char* category_name(MemCategory c) {
  switch (c) {
    case MemCategory::Weights: return "weights";
    case MemCategory::KvCache: return "kv_cache";
    case MemCategory::Activations: return "activations";
    case MemCategory::Scratch: return "scratch";
    case MemCategory::Gemm: return "gemm";
    case MemCategory::KvSelection: return "kv_selection";
    default: return "?";
  }
}

std::string format_bytes(uint64_t b) {
  char buf[64];
  if (b >= (1ull << 30)) std::snprintf(buf, sizeof buf, "%.2f GiB", b / double(1ull << 30));
  else if (b >= (1ull << 20)) std::snprintf(buf, sizeof buf, "%.1f MiB", b / double(1ull << 20));
  else if (b >= 1024) std::snprintf(buf, sizeof buf, "%.1f KiB", b / 1024.0);
  else std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(b));
  return buf;
}

uint64_t parse_byte_size(const std::string& text) {
  auto bad = [&] {
    return std::invalid_argument("invalid size '" + text +
                                 "': expected a number with an optional unit K, M or G (e.g. 256M, 1.5G, 800000K)");
  };
  size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) ++i;
  if (i == 0) throw bad();
  double value = 0;
  try {
    size_t used = 0;
    value = std::stod(text.substr(0, i), &used);
    if (used != i) throw bad();
  } catch (const std::logic_error&) {
    throw bad();
  }
  std::string unit = text.substr(i);
  for (auto& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  double mult = 1;
  if (unit.empty() || unit == "B") mult = 1;
  else if (unit == "K" || unit == "KB" || unit == "KIB") mult = 1024.0;
  else if (unit == "M" || unit == "MB" || unit == "MIB") mult = 1024.0 * 1024;
  else if (unit == "G" || unit == "GB" || unit == "GIB") mult = 1024.0 * 1024 * 1024;
  else throw bad();
  double bytes = value * mult;
  if (!std::isfinite(bytes) || bytes < 1 || bytes > 1e18) throw bad();
  return static_cast<uint64_t>(bytes);
}

uint64_t MemoryPlan::total() const {
  uint64_t t = 0;
  for (auto b : bytes) t += b;
  return t;
}

std::string MemoryPlan::describe() const {
  std::string s;
  for (size_t i = 0; i < kNumCategories; ++i) {
    if (!bytes[i]) continue;
    if (!s.empty()) s += ", ";
    s += std::string(category_name(static_cast<MemCategory>(i))) + " " + format_bytes(bytes[i]);
  }
  return s;
}

Buffer& Buffer::operator=(Buffer&& o) noexcept {
  if (this != &o) {
    release();
    mem_ = std::move(o.mem_);
    bytes_ = o.bytes_;
    category_ = o.category_;
    accounts_ = std::move(o.accounts_);
    o.bytes_ = 0;
  }
  return *this;
}

namespace {
// One counter sample per category ("device memory" in the trace: a stacked track per category)
// and the budget beside it.
void trace_memory(const MemoryAccounts& a) {
  std::vector<std::pair<std::string, double>> v;
  for (size_t i = 0; i < kNumCategories; ++i)
    v.emplace_back(category_name(static_cast<MemCategory>(i)), static_cast<double>(a.used[i]));
  trace::counter("device memory (bytes)", v);
  trace::counter("device memory budget (bytes)", {{"budget", static_cast<double>(a.budget)}});
}
}  // namespace

Buffer::~Buffer() { release(); }

void Buffer::release() noexcept {
  if (mem_ && accounts_) {
    accounts_->used[static_cast<size_t>(category_)] -= bytes_;
    accounts_->used_total -= bytes_;
    if (trace::enabled()) {
      try {
        trace_memory(*accounts_);
      } catch (...) {  // a trace sample is not worth an exception out of a destructor
      }
    }
  }
  mem_.reset();
  accounts_.reset();
  bytes_ = 0;
}

DeviceMemory::DeviceMemory(cl_context ctx, uint64_t budget, uint64_t max_alloc)
    : ctx_(ctx), max_alloc_(max_alloc), accounts_(std::make_shared<MemoryAccounts>()) {
  accounts_->budget = budget;
}

void DeviceMemory::check_plan(const MemoryPlan& plan, const std::string& hint) const {
  uint64_t need = plan.total();
  if (need + accounts_->used_total <= accounts_->budget) return;
  uint64_t minimum = need + accounts_->used_total;
  throw BudgetError("device memory budget " + format_bytes(accounts_->budget) + " is too small: this run needs " +
                        format_bytes(minimum) + " (" + plan.describe() +
                        (accounts_->used_total ? ", already allocated " + format_bytes(accounts_->used_total) : "") +
                        "). Minimum that works: {device_mem} " + std::to_string((minimum + (1 << 20) - 1) >> 20) +
                        "M" + (hint.empty() ? "" : "; or " + hint),
                    minimum, accounts_->budget);
}

Buffer DeviceMemory::alloc(MemCategory cat, size_t bytes, const std::string& label, bool in_host_memory) {
  if (bytes == 0) bytes = 4;  // OpenCL rejects empty buffers; keep the accounting exact
  if (accounts_->used_total + bytes > accounts_->budget) {
    MemoryPlan p;
    p[cat] = bytes;
    throw BudgetError("device memory budget " + format_bytes(accounts_->budget) + " exceeded allocating " + label +
                          " (" + format_bytes(bytes) + " of " + category_name(cat) + ") with " +
                          format_bytes(accounts_->used_total) + " already in use. Minimum that works: {device_mem} " +
                          std::to_string((accounts_->used_total + bytes + (1 << 20) - 1) >> 20) + "M",
                      accounts_->used_total + bytes, accounts_->budget);
  }
  if (max_alloc_ && bytes > max_alloc_)
    throw ClError("buffer " + label + " needs " + format_bytes(bytes) + " in one allocation, more than the device's " +
                  "CL_DEVICE_MAX_MEM_ALLOC_SIZE " + format_bytes(max_alloc_));
  cl_int err = injected_alloc_fault();
  cl_mem m = err == CL_SUCCESS ? clCreateBuffer(ctx_, CL_MEM_READ_WRITE | (in_host_memory ? CL_MEM_ALLOC_HOST_PTR : 0), bytes, nullptr, &err) : nullptr;
  if (err != CL_SUCCESS) throw ClError("clCreateBuffer(" + label + ", " + format_bytes(bytes) + ")", err);
  Buffer b;
  b.mem_ = MemHandle(m);
  b.bytes_ = bytes;
  b.category_ = cat;
  b.accounts_ = accounts_;
  auto i = static_cast<size_t>(cat);
  accounts_->used[i] += bytes;
  accounts_->used_total += bytes;
  accounts_->peak[i] = std::max(accounts_->peak[i], accounts_->used[i]);
  accounts_->peak_total = std::max(accounts_->peak_total, accounts_->used_total);
  if (trace::enabled()) trace_memory(*accounts_);
  return b;
}

nlohmann::json DeviceMemory::report() const {
  nlohmann::json cats = nlohmann::json::object();
  for (size_t i = 0; i < kNumCategories; ++i)
    cats[category_name(static_cast<MemCategory>(i))] = {{"used", accounts_->used[i]}, {"peak", accounts_->peak[i]}};
  return {{"budget", accounts_->budget},
          {"used", accounts_->used_total},
          {"peak", accounts_->peak_total},
          {"by_category", cats}};
}

}  // namespace infinipot::cl
