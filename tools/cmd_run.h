// `infinipot run`'s options and job, shared with `infinipot profile` (same flags, same run).
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <CLI/CLI.hpp>

#include "engine/answer.h"

namespace infinipot::cli {

struct RunOpts {
  std::string model, prompt, file, question, system, device, device_mem, kv_type = "auto", weights = "auto";
  int n_predict = 256;
  float temp = 0.0f;
  int top_k = 40;
  float top_p = 0.95f;
  uint64_t seed = 0;
  int ctx = 0;
  int chunk = 0;
  bool json = false;
  bool raw = false;
  bool round_activations = false;  // --round-activations
  // Memory pot (InfiniPot): off unless --pot is given.
  int pot = 0;
  int keep = 0;
  float nuc_ratio = 0.5f;
  int nuc_stride = 0;  // 0: not given (the policy scores every token)
  std::string catalyst;
  bool catalyst_given = false;
  std::string policy;  // "" = infinipot with --pot, else full
  bool no_cr_rope = false;
  std::string positions;  // --positions: reset, stream, fit, gaps (empty: reset)
  int position_gap = 0;   // --position-gap (0: not given)
  int pool = -1, pool_ahead = -1, recent = -1;
  std::string pot_heads = "shared", pot_layers = "shared", units = "word", cap_rows = "question";
  bool nuc_given = false, heads_given = false, layers_given = false, units_given = false, pool_given = false,
       cap_rows_given = false;
  std::string watch;
  bool watch_attention = false;  // --pot-watch-attention
  std::string oracle;
  bool pot_text = false;  // --pot-text: print what the pot holds at the end
  std::string select = "device";
  std::string save_pot, load_pot;  // pot snapshots
};


// Registers run's flags on a subcommand; returns its -p and -f options.
std::pair<CLI::Option*, CLI::Option*> add_run_flags(CLI::App* sub, const std::shared_ptr<RunOpts>& o);
// Answers as `infinipot run` does (streams, prints the figures); `after` sees the engine and
// the answer before the engine goes away.
void run(const RunOpts& o, bool have_prompt, bool have_file,
         const std::function<void(Engine&, const Answer&)>& after = {});

}  // namespace infinipot::cli
