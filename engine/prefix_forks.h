// Reading a shared document prefix once. nih's trials of one task, haystack, length and policy
// read the same haystack up to their first needle: the pot's state after a chunk boundary
// before that point is the same for all of them, so later trials start from a snapshot of it
// (Engine's GenerateOptions::resume) instead of reading the prefix again. At three depths
// that reads about 8.4 documents' worth of tokens instead of 15 for 5 keys per depth.
//
// Exactness: a trial resumed at document token b ends with the very pot a full read gives,
// because everything the pot decides before b depends only on what both trials share:
//  - the tokens before b and the token at b (NuC scores a chunk's last token against the next
//    one), so b < the length of the common token prefix;
//  - the policy's settings, the catalyst and the chat prefix: the `key` of a trial;
//  - whether the rest of the input fits the pot (MemoryPot::read reserves room for the
//    catalyst otherwise): false for both while more than `capacity` document tokens are
//    left, so b <= body length - capacity - 1 for both.
// A whole-input policy (SnapKV) has room for everything, so the rest always fits; nih gives
// every trial of its cell the same store size (AnswerOptions::whole_capacity), so that the
// settings, and with them the snapshots, match.
// test_nih checks it: answers and needle retention with and without forks are equal.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "model_loader/tokenizer.h"
#include "pot/pot_snapshot.h"

namespace infinipot::nih {

class PrefixForks {
 public:
  struct Trial {
    std::string key;              // what else must be equal: policy settings, catalyst, chat prefix
    std::vector<TokenId> body;    // the document's tokens
  };
  // The trials in the order they will run; capacity: the pot's size in entries.
  PrefixForks(std::vector<Trial> trials, int capacity);

  // Before trial i runs: the snapshot to start from (null: read from the start) and how many
  // document tokens it has read.
  std::shared_ptr<const PotSnapshot> start(size_t i) const;
  int start_body(size_t i) const;
  // While trial i runs, after each chunk: whether a later trial could start here (then take a
  // snapshot and offer it).
  bool wants(size_t i, int body_done) const;
  void offer(size_t i, int body_done, std::shared_ptr<const PotSnapshot> snap);
  // Trial i is done: its snapshot is released.
  void finished(size_t i);

  // The furthest document token at which trial j may start from trial i's state (i < j); -1 if
  // nowhere.
  int limit(size_t i, size_t j) const;
  size_t size() const { return trials_.size(); }

 private:
  struct Start {
    int body = -1;
    std::shared_ptr<const PotSnapshot> snap;
  };
  int shared_limit(const Trial& a, const Trial& b) const;
  std::vector<Trial> trials_;
  int capacity_;
  std::vector<std::vector<int>> limits_;  // [i][j]: limit(i, j), worked out once
  std::vector<Start> starts_;
};

}  // namespace infinipot::nih
