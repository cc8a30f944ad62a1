#include "server/conversation_pool.h"

#include <filesystem>
#include <fstream>
#include <iostream>

#include <nlohmann/json.hpp>

namespace infinipot::server {

namespace fs = std::filesystem;
using nlohmann::json;

ConversationPool::ConversationPool(Engine& engine, PoolOptions options) : engine_(engine), opt_(std::move(options)) {
  if (opt_.sessions < 1) throw std::invalid_argument("sessions must be at least 1");
  if (!opt_.cache_dir.empty()) {
    fs::create_directories(opt_.cache_dir);
    load_index();
  }
  update_counts();
}

// The files an earlier server left: their messages are read now, their pots when matched.
// Files for another model or other pot settings are left alone.
void ConversationPool::load_index() {
  const json settings = MemoryPot::settings_json(engine_.pot()->options());
  for (const fs::directory_entry& f : fs::directory_iterator(opt_.cache_dir)) {
    if (f.path().extension() != ".json" || f.path().stem().string().rfind("conv-", 0) != 0) continue;
    try {
      std::ifstream in(f.path());
      const json j = json::parse(in);
      if (j.at("model_id") != engine_.model_id() || j.at("settings") != settings) continue;
      Entry e;
      e.file = f.path().stem().string();
      e.document_id = j.at("document").get<std::string>();
      if (!e.document_id.empty()) continue;  // documents live in memory only: its pot is gone
      for (const json& m : j.at("messages")) e.messages.push_back({m.at("role"), m.at("content")});
      entries_.push_back(std::move(e));
      next_file_ = std::max<uint64_t>(next_file_, std::stoull(f.path().stem().string().substr(5)) + 1);
    } catch (const std::exception& ex) {
      std::cerr << "serve: skipping " << f.path().string() << ": " << ex.what() << "\n";
    }
  }
}

ConversationPool::Match ConversationPool::find(const std::vector<ChatMessage>& messages, const std::string& document_id,
                                               std::shared_ptr<const PotSnapshot> document) {
  Match best;
  auto best_it = entries_.end();
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    if (it->document_id != document_id) continue;
    size_t held = 0;
    held = it->conversation ? it->conversation->holds(messages) : history_prefix(it->messages, messages);
    if (held > best.held) {
      best.held = held;
      best_it = it;
    }
  }
  if (best_it != entries_.end() && !best_it->conversation && !bring_back(*best_it)) {
    entries_.erase(best_it);
    best_it = entries_.end();
    best.held = 0;
  }
  if (best_it == entries_.end()) {
    Entry e;
    e.conversation = document ? std::make_shared<Conversation>(document) : std::make_shared<Conversation>();
    e.document_id = document_id;
    entries_.push_front(std::move(e));
    best.conversation = entries_.front().conversation;
    best.held = 0;
  } else {
    entries_.splice(entries_.begin(), entries_, best_it);
    best.conversation = entries_.front().conversation;
  }
  update_counts();
  return best;
}

void ConversationPool::touched(const std::shared_ptr<Conversation>& c) {
  for (auto it = entries_.begin(); it != entries_.end(); ++it)
    if (it->conversation == c) {
      entries_.splice(entries_.begin(), entries_, it);
      break;
    }
  shed();
  update_counts();
}

void ConversationPool::park_active() {
  for (Entry& e : entries_)
    if (e.conversation && e.conversation->active(engine_)) e.conversation->park(engine_);
}

void ConversationPool::save_all() {
  for (Entry& e : entries_)
    if (e.conversation) spill(e);
  update_counts();
}

void ConversationPool::forget(const std::shared_ptr<Conversation>& c) {
  entries_.remove_if([&](const Entry& e) { return e.conversation == c; });
  update_counts();
}

void ConversationPool::forget_document(const std::string& document_id) {
  entries_.remove_if([&](const Entry& e) { return e.document_id == document_id; });
  update_counts();
}

void ConversationPool::spill(Entry& e) {
  if (opt_.cache_dir.empty() || !e.document_id.empty()) {  // nowhere to keep it
    e.conversation.reset();
    return;
  }
  Conversation& c = *e.conversation;
  if (c.active(engine_)) c.park(engine_);
  if (!c.parked()) {  // never answered (a failed first turn): nothing worth keeping
    e.conversation.reset();
    return;
  }
  if (e.file.empty()) e.file = "conv-" + std::to_string(next_file_++);
  const fs::path stem = fs::path(opt_.cache_dir) / e.file;
  try {
    write_pot_snapshot(stem.string() + ".ipot", *c.parked_state());
    json j = {{"model_id", engine_.model_id()},
              {"settings", MemoryPot::settings_json(engine_.pot()->options())},
              {"document", e.document_id},
              {"unread", c.unread()},
              {"messages", json::array()}};
    for (const ChatMessage& m : c.messages()) j["messages"].push_back({{"role", m.role}, {"content", m.content}});
    const std::string tmp = stem.string() + ".json.tmp";
    {
      std::ofstream out(tmp);
      out << j.dump(-1, ' ', false, json::error_handler_t::replace);
      if (!out) throw std::runtime_error("cannot write " + tmp);
    }
    fs::rename(tmp, stem.string() + ".json");  // the index names only whole snapshots
    e.messages = c.messages();
  } catch (const std::exception& ex) {
    std::cerr << "serve: could not save a conversation to " << stem.string() << ": " << ex.what() << "\n";
    e.file.clear();
  }
  e.conversation.reset();
}

bool ConversationPool::bring_back(Entry& e) {
  const fs::path stem = fs::path(opt_.cache_dir) / e.file;
  try {
    std::ifstream in(stem.string() + ".json");
    const json j = json::parse(in);
    auto snap = std::make_shared<PotSnapshot>(read_pot_snapshot(stem.string() + ".ipot"));
    if (snap->model_id != engine_.model_id()) throw std::runtime_error("saved with another model");
    auto c = std::make_shared<Conversation>();
    c->adopt(snap, e.messages, j.at("unread").get<std::vector<TokenId>>());
    e.conversation = std::move(c);
    return true;
  } catch (const std::exception& ex) {
    std::cerr << "serve: could not bring back " << stem.string() << ": " << ex.what() << " (read afresh)\n";
    std::error_code ec;
    fs::remove(stem.string() + ".json", ec);
    fs::remove(stem.string() + ".ipot", ec);
    return false;
  }
}

void ConversationPool::shed() {
  int kept = 0, stored = 0;
  for (auto it = entries_.begin(); it != entries_.end();) {
    if (it->conversation) {
      if (++kept > opt_.sessions) spill(*it);
    }
    if (!it->conversation) {
      if (it->file.empty() || ++stored > opt_.disk_limit) {
        if (!it->file.empty()) {
          std::error_code ec;
          fs::remove(fs::path(opt_.cache_dir) / (it->file + ".json"), ec);
          fs::remove(fs::path(opt_.cache_dir) / (it->file + ".ipot"), ec);
        }
        it = entries_.erase(it);
        continue;
      }
    }
    ++it;
  }
}

void ConversationPool::update_counts() {
  int mem = 0, disk = 0;
  for (const Entry& e : entries_) (e.conversation ? mem : disk)++;
  in_memory_ = mem;
  on_disk_ = disk;
}

}  // namespace infinipot::server
