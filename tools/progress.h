// The progress line long commands show on a terminal: one updating line on stderr while a
// prefill or a sweep runs, nothing when stderr is not a terminal or the output is JSON.
#pragma once
#include <string>

#include "engine/engine.h"

namespace infinipot::cli {

// "42s", "3m07s", "1h05m"; "?" for a negative or non-finite time.
std::string fmt_duration(double seconds);

// Whether a command should draw progress: stderr is a terminal and the output is not JSON.
bool progress_wanted(bool json);

// "prefill 12288/65536 tokens (19%) | 74 tok/s | 11m58s left | 23 pot cycles"
std::string prefill_status(const PrefillProgress& p);

class Progress {
 public:
  explicit Progress(bool enabled) : enabled_(enabled) {}
  ~Progress() { done(); }
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;
  // Redraws the line (cut to the terminal's width); nothing when disabled.
  void status(const std::string& line);
  // A line that stays: printed whether or not the progress line is enabled.
  void line(const std::string& text);
  // Clears the progress line, if one is shown.
  void done();
  bool enabled() const { return enabled_; }

 private:
  bool enabled_;
  bool shown_ = false;
};

}  // namespace infinipot::cli
