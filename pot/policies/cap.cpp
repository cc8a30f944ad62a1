// cap: CCD with the catalyst prompt's attention only (the paper's "CaP" ablation row).
#include "pot/policies/ccd.h"

namespace infinipot {

std::unique_ptr<PotPolicy> make_cap_policy(const PolicyParams& p) { return std::make_unique<CcdPolicy>(p, 0.0f); }

}  // namespace infinipot
