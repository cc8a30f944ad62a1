// nuc: CCD with novelty only, -log p of each token when it was read (the paper's "NuC"
// ablation row; close to SirLLM's token-entropy memory).
#include "pot/policies/ccd.h"

namespace infinipot {

std::unique_ptr<PotPolicy> make_nuc_policy(const PolicyParams& p) { return std::make_unique<CcdPolicy>(p, 1.0f); }

}  // namespace infinipot
