// A long nih trial that survives its process: every `every_s` seconds of reading, the pot is
// saved (pot/pot_snapshot.h) under the checkpoint directory, named after the trial; a later
// run of the same trial (same results file, model and trial identity) starts from the last
// one instead of from the document's start. A resumed read ends with the very pot a full
// read gives (the same argument as engine/prefix_forks.h: the state after a chunk boundary
// is all a read carries forward; TaskCli tests it). The file goes once the trial's record is
// written. Meant for cells that outlast a session (a 128K or 1M-token trial on a CPU device
// reads for an hour or more).
#pragma once
#include <chrono>
#include <memory>
#include <string>

#include "pot/pot_snapshot.h"

namespace infinipot::nih {

class TrialCheckpoint {
 public:
  // dir "" = off (every call below does nothing). identity: whatever makes the trial this one
  // (results file, model, trial id); it names the file. every_s: seconds of reading between saves.
  TrialCheckpoint(std::string dir, const std::string& identity, double every_s);

  // Makes dir (and its parents) or throws std::invalid_argument naming --checkpoint-dir.
  static void prepare_dir(const std::string& dir);

  bool enabled() const { return !path_.empty(); }
  const std::string& path() const { return path_; }
  // The saved pot, if a readable one is there (null: none; a file that does not parse is
  // removed, and `problem` says why).
  std::shared_ptr<const PotSnapshot> load(std::string* problem);
  // After a chunk: whether a save is due (the first after every_s seconds since the last).
  bool due() const;
  void save(const PotSnapshot& snap);
  // The trial is recorded (or its checkpoint cannot serve): the file goes.
  void remove();
  int saves() const { return saves_; }

 private:
  std::string path_;
  double every_s_;
  std::chrono::steady_clock::time_point last_;
  int saves_ = 0;
};

}  // namespace infinipot::nih
