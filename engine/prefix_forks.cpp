#include "engine/prefix_forks.h"

#include <algorithm>
#include <stdexcept>

namespace infinipot::nih {

PrefixForks::PrefixForks(std::vector<Trial> trials, int capacity)
    : trials_(std::move(trials)), capacity_(capacity), starts_(trials_.size()) {
  if (capacity < 1) throw std::invalid_argument("PrefixForks: the pot's capacity must be positive");
  limits_.assign(trials_.size(), std::vector<int>(trials_.size(), -1));
  for (size_t i = 0; i < trials_.size(); ++i)
    for (size_t j = i + 1; j < trials_.size(); ++j) limits_[i][j] = shared_limit(trials_[i], trials_[j]);
}

int PrefixForks::shared_limit(const Trial& a, const Trial& b) const {
  if (a.key != b.key) return -1;
  const size_t n = std::min(a.body.size(), b.body.size());
  size_t common = 0;
  while (common < n && a.body[common] == b.body[common]) ++common;
  // b < common: the token at b is shared too; and more than capacity tokens left in both.
  const long long fits = static_cast<long long>(n) - capacity_ - 1;
  return static_cast<int>(std::max(-1LL, std::min(static_cast<long long>(common) - 1, fits)));
}

int PrefixForks::limit(size_t i, size_t j) const { return i < j ? limits_.at(i).at(j) : -1; }

std::shared_ptr<const PotSnapshot> PrefixForks::start(size_t i) const { return starts_.at(i).snap; }

int PrefixForks::start_body(size_t i) const { return starts_.at(i).snap ? starts_.at(i).body : 0; }

bool PrefixForks::wants(size_t i, int body_done) const {
  for (size_t j = i + 1; j < trials_.size(); ++j)
    if (body_done > starts_[j].body && body_done <= limits_[i][j]) return true;
  return false;
}

void PrefixForks::offer(size_t i, int body_done, std::shared_ptr<const PotSnapshot> snap) {
  for (size_t j = i + 1; j < trials_.size(); ++j)
    if (body_done > starts_[j].body && body_done <= limits_[i][j]) starts_[j] = {body_done, snap};
}

void PrefixForks::finished(size_t i) { starts_.at(i) = {}; }

}  // namespace infinipot::nih
