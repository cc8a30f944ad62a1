// How a policy holds the input while it is read: the three ways, behind one interface. Each
// registry entry (pot/policy_registry.h) names its way; callers ask the way to size the
// store and to finish reading, and never test which way it is.
//   through a pot  the memory pot of N entries, distilled whenever it would overflow;
//   whole input    every entry of the prompt held, then one selection down to N (SnapKV);
//   full cache     no pot: a KV cache that holds the whole prompt and the answer.
#pragma once
#include <optional>
#include <string>

#include "pot/memory_pot.h"

namespace infinipot {

// What a job asks of the KV store, before its prompt is known.
struct StoreRequest {
  PotOptions pot;    // the policy's pot: pot.capacity is the pot's size N (0: none given)
  int ctx = 0;       // a full cache's entries (0: the prompt and its answer)
  // Ways that size the store to the prompt (whole input) hold at least this many entries,
  // so that the stores of several prompts (nih's trials of one cell) have the same settings.
  int at_least = 0;
};

// The store a prompt of a given layout gets.
struct StorePlan {
  int kv_capacity = 0;            // KV entries the device holds
  std::optional<PotOptions> pot;  // the resolved pot; none: a plain KV cache of kv_capacity entries
};

class Reading {
 public:
  virtual ~Reading() = default;
  virtual const char* name() const = 0;  // for tables: "through a pot", ...
  // Sizes the store for a prompt of this layout (layout.catalyst is 0 for policies without a
  // catalyst); throws std::invalid_argument when the settings cannot hold it.
  virtual StorePlan size(const StoreRequest& request, const PotLayout& layout) const = 0;
  // Whether the input may arrive as a stream of unknown length (the C API's feed, a
  // conversation): a way that must see the whole input before it selects cannot.
  virtual bool reads_a_stream() const = 0;
  // Once the document is in the pot, before the question goes in.
  virtual void after_document(MemoryPot& pot) const { (void)pot; }
  // When the store does not fit the memory budget: what would make it smaller. entries: how
  // much the store's entries take ("4096 entries take 96 MiB, 24 KiB per token").
  virtual std::string smaller_store(const std::string& policy, const std::string& entries) const = 0;
};

const Reading& reading_through_pot();
const Reading& reading_whole_input();
const Reading& reading_full_cache();

}  // namespace infinipot
