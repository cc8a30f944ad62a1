// The conversations a server holds. One is on the device (the engine's pot holds it); up to
// `sessions` stay in memory, the others parked as host-side pot snapshots; beyond that the
// least recently used go to `cache_dir` as pot snapshot files (the `--save-pot` format) with
// their messages beside them, and come back when their client returns, after a restart too.
// A request is matched to the conversation whose history is the longest prefix of its
// messages (the same document, if any); none: a new one reads the history through a fresh pot.
// Used from the device's worker thread only; the counts may be read from any thread.
#pragma once
#include <atomic>
#include <list>
#include <memory>
#include <string>
#include <vector>

#include "engine/conversation.h"

namespace infinipot::server {

struct PoolOptions {
  int sessions = 4;        // conversations held in memory (the one on the device included)
  std::string cache_dir;   // where the others go ("": they are forgotten)
  int disk_limit = 256;    // conversations kept in cache_dir (the oldest files are removed)
};

class ConversationPool {
 public:
  ConversationPool(Engine& engine, PoolOptions options);

  struct Match {
    std::shared_ptr<Conversation> conversation;
    size_t held = 0;  // messages it holds already (0: new)
  };
  // The conversation to answer `messages` with (document_id "" for none; document: its pot).
  Match find(const std::vector<ChatMessage>& messages, const std::string& document_id,
             std::shared_ptr<const PotSnapshot> document);
  // After its turn: it is the most recently used; the pool sheds what is over its limits.
  void touched(const std::shared_ptr<Conversation>& conversation);
  // The engine's pot is about to hold another stream: the conversation on it is parked first.
  void park_active();
  // The server stops: every conversation in memory goes to cache_dir (none without one).
  void save_all();
  // A conversation whose turn failed: dropped.
  void forget(const std::shared_ptr<Conversation>& conversation);
  // A document was deleted: conversations about it are forgotten.
  void forget_document(const std::string& document_id);

  int in_memory() const { return in_memory_; }
  int on_disk() const { return on_disk_; }

 private:
  struct Entry {
    std::shared_ptr<Conversation> conversation;  // null while on disk
    std::string document_id;
    std::string file;                            // its files' stem in cache_dir ("" none)
    std::vector<ChatMessage> messages;           // on disk: what it holds (to match)
  };
  void load_index();
  void spill(Entry& e);
  bool bring_back(Entry& e);
  void shed();
  void update_counts();
  Engine& engine_;
  PoolOptions opt_;
  std::list<Entry> entries_;  // most recently used first
  uint64_t next_file_ = 0;
  std::atomic<int> in_memory_{0}, on_disk_{0};
};

}  // namespace infinipot::server
