#include "pot/selection.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>

namespace infinipot {

PotPolicy parse_pot_policy(const std::string& name) {
  if (name == "infinipot") return PotPolicy::InfiniPot;
  if (name == "recent") return PotPolicy::Recent;
  throw std::invalid_argument("--pot-policy must be infinipot or recent, got '" + name + "'");
}

const char* pot_policy_name(PotPolicy p) { return p == PotPolicy::Recent ? "recent" : "infinipot"; }

namespace {

// Higher score first; NaN last; ties to the later slot.
struct ByScore {
  const float* score;
  bool operator()(int a, int b) const {
    const float x = score[a], y = score[b];
    const bool xn = std::isnan(x), yn = std::isnan(y);
    if (xn != yn) return yn;
    if (!xn && x != y) return x > y;
    return a > b;
  }
};

// Moves the best `count` of cand to its front (order among them unspecified).
void take_best(std::vector<int>& cand, int count, const float* score) {
  if (count <= 0 || cand.empty()) return;
  count = std::min<int>(count, static_cast<int>(cand.size()));
  std::nth_element(cand.begin(), cand.begin() + (count - 1), cand.end(), ByScore{score});
  // nth_element puts the count-th best at count-1 and everything better before it.
}

// out[j] = max of in[j-w .. j+w] over slots in [lo, hi); NaN only where the window has no number.
void max_pool(const float* in, float* out, int lo, int hi, int w) {
  for (int j = lo; j < hi; ++j) {
    float best = std::numeric_limits<float>::quiet_NaN();
    for (int k = std::max(lo, j - w); k <= std::min(hi - 1, j + w); ++k)
      if (!std::isnan(in[k]) && (std::isnan(best) || in[k] > best)) best = in[k];
    out[j] = best;
  }
}

}  // namespace

std::vector<int> select_survivors(const SelectionRequest& r) {
  if (r.n_heads <= 0 || r.size < 0 || r.stride < r.size)
    throw std::invalid_argument("select_survivors: bad shape");
  if (r.pinned < 0 || r.pinned > r.keep || r.keep > r.size)
    throw std::invalid_argument("select_survivors: need 0 <= pinned (" + std::to_string(r.pinned) + ") <= keep (" +
                                std::to_string(r.keep) + ") <= size (" + std::to_string(r.size) + ")");
  const int free_places = r.keep - r.pinned;
  if (r.nuc_slots < 0 || r.nuc_slots > free_places)
    throw std::invalid_argument("select_survivors: nuc_slots must lie in [0, keep - pinned]");
  if (r.policy == PotPolicy::InfiniPot && (!r.mass || (r.nuc_slots > 0 && !r.nuc)))
    throw std::invalid_argument("select_survivors: infinipot policy needs mass (and nuc for NuC slots)");

  if (r.pool < 0) throw std::invalid_argument("select_survivors: pool must be >= 0");
  std::vector<int> out(size_t(r.n_heads) * r.keep);
  std::vector<int> cand;
  std::vector<float> pooled_mass, pooled_nuc;
  if (r.pool > 0) {
    pooled_mass.assign(r.stride, 0.0f);
    pooled_nuc.assign(r.stride, 0.0f);
  }
  if (r.shared_heads && r.n_heads > 1 && r.policy == PotPolicy::InfiniPot) {
    // Choose once on the head-summed scores, then give every head the same survivors.
    std::vector<float> mass_sum(r.stride, 0.0f), nuc_sum(r.stride, 0.0f);
    for (int h = 0; h < r.n_heads; ++h)
      for (int j = 0; j < r.size; ++j) {
        mass_sum[j] += r.mass[size_t(h) * r.stride + j];
        if (r.nuc) nuc_sum[j] += r.nuc[size_t(h) * r.stride + j];
      }
    SelectionRequest one = r;
    one.n_heads = 1;
    one.shared_heads = false;
    one.mass = mass_sum.data();
    one.nuc = r.nuc ? nuc_sum.data() : nullptr;
    const std::vector<int> chosen = select_survivors(one);
    for (int h = 0; h < r.n_heads; ++h) std::copy(chosen.begin(), chosen.end(), out.begin() + size_t(h) * r.keep);
    return out;
  }
  for (int h = 0; h < r.n_heads; ++h) {
    int* dst = out.data() + size_t(h) * r.keep;
    std::iota(dst, dst + r.pinned, 0);
    if (r.policy == PotPolicy::Recent) {
      std::iota(dst + r.pinned, dst + r.keep, r.size - free_places);
      continue;
    }
    const float* mass = r.mass + size_t(h) * r.stride;
    const float* nuc = r.nuc ? r.nuc + size_t(h) * r.stride : nullptr;
    if (r.pool > 0) {
      max_pool(mass, pooled_mass.data(), r.pinned, r.size, r.pool);
      mass = pooled_mass.data();
      if (nuc) {
        max_pool(nuc, pooled_nuc.data(), r.pinned, r.size, r.pool);
        nuc = pooled_nuc.data();
      }
    }
    cand.resize(r.size - r.pinned);
    std::iota(cand.begin(), cand.end(), r.pinned);
    // Step 1 (NuC): the nuc_slots most novel tokens.
    take_best(cand, r.nuc_slots, nuc);
    // Step 2 (CaP): of the rest, the highest catalyst attention mass.
    std::vector<int> rest(cand.begin() + r.nuc_slots, cand.end());
    take_best(rest, free_places - r.nuc_slots, mass);
    std::copy(cand.begin(), cand.begin() + r.nuc_slots, dst + r.pinned);
    std::copy(rest.begin(), rest.begin() + (free_places - r.nuc_slots), dst + r.pinned + r.nuc_slots);
    std::sort(dst + r.pinned, dst + r.keep);
  }
  return out;
}

}  // namespace infinipot
