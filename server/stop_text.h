// OpenAI's `stop`: the answer ends before the first stop sequence it produces, and the text
// shown while streaming never includes part of one (what could still become one is held back).
#pragma once
#include <string>
#include <vector>

namespace infinipot::server {

class StopText {
 public:
  explicit StopText(std::vector<std::string> stops) : stops_(std::move(stops)) {}
  // Adds generated text; returns what may be shown now.
  std::string add(const std::string& piece) {
    if (stopped_) return "";
    pending_ += piece;
    size_t first = std::string::npos;
    for (const std::string& s : stops_) first = std::min(first, pending_.find(s));
    if (first != std::string::npos) {
      stopped_ = true;
      return show(first, true);
    }
    // Hold back the longest end of the text that begins a stop sequence.
    size_t hold = 0;
    for (const std::string& s : stops_)
      for (size_t n = std::min(s.size() - 1, pending_.size()); n > hold; --n)
        if (pending_.compare(pending_.size() - n, n, s, 0, n) == 0) {
          hold = n;
          break;
        }
    return show(pending_.size() - hold, false);
  }
  // At the end: what was held back (nothing after a stop).
  std::string flush() { return stopped_ ? "" : show(pending_.size(), true); }
  bool stopped() const { return stopped_; }
  const std::string& shown() const { return shown_; }

 private:
  std::string show(size_t n, bool drop_rest) {
    std::string out = pending_.substr(0, n);
    pending_ = drop_rest ? "" : pending_.substr(n);
    shown_ += out;
    return out;
  }
  std::vector<std::string> stops_;
  std::string pending_, shown_;
  bool stopped_ = false;
};

}  // namespace infinipot::server
