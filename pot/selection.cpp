#include "pot/selection.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <string>

namespace infinipot {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// Higher score first; NaN last; ties to the later slot.
bool better(float x, int a, float y, int b) {
  const bool xn = std::isnan(x), yn = std::isnan(y);
  if (xn != yn) return yn;
  if (!xn && x != y) return x > y;
  return a > b;
}

}  // namespace

void spread_scores(const float* in, const int* unit, int lo, int hi, int back, int fwd, float* out) {
  for (int j = lo; j < hi; ++j) {
    int first = j, last = j;
    if (unit) {
      while (first > lo && unit[first - 1] == unit[j]) --first;
      while (last + 1 < hi && unit[last + 1] == unit[j]) ++last;
    }
    float best = kNaN;
    for (int i = std::max(lo, first - back); i <= std::min(hi - 1, last + fwd); ++i)
      if (!std::isnan(in[i]) && (std::isnan(best) || in[i] > best)) best = in[i];
    out[j] = best;
  }
}

int take_best(const float* score, int lo, int hi, int count, std::vector<char>& taken) {
  std::vector<int> cand;
  for (int j = lo; j < hi; ++j)
    if (!taken[j]) cand.push_back(j);
  count = std::min<int>(count, static_cast<int>(cand.size()));
  if (count <= 0) return 0;
  std::nth_element(cand.begin(), cand.begin() + (count - 1), cand.end(),
                   [&](int a, int b) { return better(score[a], a, score[b], b); });
  for (int i = 0; i < count; ++i) taken[cand[i]] = 1;
  return count;
}

const float* measure_scores(const PotScores& s, Measure m) {
  switch (m) {
    case Measure::Catalyst: return s.catalyst;
    case Measure::Novelty: return s.novelty;
    case Measure::Accumulated: return s.accumulated;
    case Measure::LastQuery: return s.last_query;
  }
  return nullptr;
}

std::vector<int> PotPolicy::select(const PotScores& s) const {
  const ChoicePlan p = plan(s);
  std::vector<ChoiceStage> stages;
  for (const PlanStage& st : p.stages) {
    const float* score = measure_scores(s, st.measure);
    if (!score) throw std::invalid_argument("PotPolicy::select: a stage reads a measurement the pot did not take");
    stages.push_back({score, st.count});
  }
  return choose_survivors(s, stages, p.shape);
}

std::vector<int> choose_survivors(const PotScores& s, const std::vector<ChoiceStage>& stages, const ChoiceShape& shape) {
  if (s.n_layers <= 0 || s.n_heads <= 0 || s.size < 0 || s.stride < s.size)
    throw std::invalid_argument("choose_survivors: bad shape");
  if (s.pinned < 0 || s.pinned > s.keep || s.keep > s.size)
    throw std::invalid_argument("choose_survivors: need 0 <= pinned (" + std::to_string(s.pinned) + ") <= keep (" +
                                std::to_string(s.keep) + ") <= size (" + std::to_string(s.size) + ")");
  if (shape.head < 0 || shape.recent < 0 || shape.back < 0 || shape.fwd < 0)
    throw std::invalid_argument("choose_survivors: negative window");
  for (const auto& st : stages)
    if (!st.score || st.count < 0) throw std::invalid_argument("choose_survivors: a stage without scores");
  const int L = s.n_layers, H = s.n_heads, n = s.size;
  const int layer_groups = shape.per_layer ? L : 1, head_groups = shape.per_head ? H : 1;
  std::vector<int> out(size_t(L) * H * s.keep);
  std::vector<float> sum(n), spread(n);
  std::vector<char> taken(n);
  for (int lg = 0; lg < layer_groups; ++lg)
    for (int hg = 0; hg < head_groups; ++hg) {
      const int l0 = shape.per_layer ? lg : 0, l1 = shape.per_layer ? lg + 1 : L;
      const int h0 = shape.per_head ? hg : 0, h1 = shape.per_head ? hg + 1 : H;
      std::fill(taken.begin(), taken.end(), 0);
      std::fill(taken.begin(), taken.begin() + s.pinned, 1);
      int free_places = s.keep - s.pinned;
      if (s.oracle_first >= 0 && s.source)  // diagnostics: the watched fact is kept outright
        for (int j = s.pinned; j < n && free_places > 0; ++j) {
          const int src = s.source[s.at(l0, h0) + j];
          if (src >= s.oracle_first && src <= s.oracle_last) taken[j] = 1, --free_places;
        }
      // Outright keeps: the entries after the prefix, then the newest.
      const int head = std::min(shape.head, free_places);
      for (int j = s.pinned; j < s.pinned + head; ++j)
        if (!taken[j]) taken[j] = 1, --free_places;
      const int recent = std::min(shape.recent, free_places);
      for (int j = n - recent; j < n; ++j)
        if (!taken[j]) taken[j] = 1, --free_places;
      const int* unit = shape.units && s.unit ? s.unit + s.at(l0, h0) : nullptr;
      for (size_t k = 0; k < stages.size() && free_places > 0; ++k) {
        for (int j = 0; j < n; ++j) {
          float acc = kNaN;
          for (int l = l0; l < l1; ++l)
            for (int h = h0; h < h1; ++h) {
              const float v = stages[k].score[s.at(l, h) + j];
              if (!std::isnan(v)) acc = std::isnan(acc) ? v : acc + v;
            }
          sum[j] = acc;
        }
        spread_scores(sum.data(), unit, s.pinned, n, shape.back, shape.fwd, spread.data());
        const int want = k + 1 == stages.size() ? free_places : std::min(stages[k].count, free_places);
        free_places -= take_best(spread.data(), s.pinned, n, want, taken);
      }
      // Without stages (or if stages ran dry) the newest free entries fill what is left.
      for (int j = n - 1; j >= 0 && free_places > 0; --j)
        if (!taken[j]) taken[j] = 1, --free_places;
      std::vector<int> chosen;
      chosen.reserve(s.keep);
      for (int j = 0; j < n; ++j)
        if (taken[j]) chosen.push_back(j);
      if (static_cast<int>(chosen.size()) != s.keep) throw std::logic_error("choose_survivors: kept a wrong count");
      for (int l = l0; l < l1; ++l)
        for (int h = h0; h < h1; ++h)
          std::copy(chosen.begin(), chosen.end(), out.begin() + (size_t(l) * H + h) * s.keep);
    }
  return out;
}

int keep_by_mass(const PotScores& s, const ChoicePlan& plan, float mass, int least, int most) {
  if (least > most) throw std::invalid_argument("keep_by_mass: least above most");
  const int n = s.size, lo = s.pinned;
  long long total_count = 0;
  for (const PlanStage& st : plan.stages) total_count += std::max(0, st.count);
  if (n <= lo || total_count == 0) return most;
  std::vector<double> mix(n, 0.0);
  std::vector<float> sum(n), spread(n);
  const int* unit = plan.shape.units ? s.unit : nullptr;  // slot order is the same in every (layer, head) of a shared choice
  bool any = false;
  for (const PlanStage& st : plan.stages) {
    const float* score = measure_scores(s, st.measure);
    if (!score) throw std::invalid_argument("keep_by_mass: a stage reads a measurement the pot did not take");
    for (int j = 0; j < n; ++j) {
      double acc = 0;
      for (int l = 0; l < s.n_layers; ++l)
        for (int h = 0; h < s.n_heads; ++h) {
          const float v = score[s.at(l, h) + j];
          if (v > 0) acc += v;  // NaN fails the test too
        }
      sum[j] = static_cast<float>(acc);
    }
    spread_scores(sum.data(), unit, lo, n, plan.shape.back, plan.shape.fwd, spread.data());
    double total = 0;
    for (int j = lo; j < n; ++j) total += spread[j];
    if (!(total > 0)) continue;
    const double weight = double(std::max(0, st.count)) / double(total_count);
    for (int j = lo; j < n; ++j) mix[j] += weight * spread[j] / total;
    any = true;
  }
  if (!any) return most;
  std::vector<double> share(mix.begin() + lo, mix.end());
  std::sort(share.begin(), share.end(), std::greater<double>());
  double have = 0, whole = std::accumulate(share.begin(), share.end(), 0.0);
  int count = 0;
  while (count < static_cast<int>(share.size()) && have < mass * whole) have += share[count++];
  return std::clamp(lo + count, least, most);
}

}  // namespace infinipot
