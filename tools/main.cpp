// infinipot: the command-line program. Each subcommand lives in tools/cmd_*.cpp.
#include <cstdio>
#include <exception>
#include <string>

#include "runtime/cl_error.h"
#include "runtime/device_memory.h"
#include "runtime/profiler.h"
#include "tools/cli_common.h"

int main(int argc, char** argv) {
  CLI::App app{"infinipot: OpenCL LLM inference with a fixed-size KV memory pot"};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "Show help for every subcommand");
  app.set_version_flag("--version", std::string("infinipot 0.1.0 (build ") + infinipot::cli::build_id() + ")");
  infinipot::cli::add_devices_command(app);
  infinipot::cli::add_inspect_command(app);
  infinipot::cli::add_tokenize_command(app);
  infinipot::cli::add_run_command(app);
  infinipot::cli::add_perplexity_command(app);
  infinipot::cli::add_nih_command(app);
  infinipot::cli::add_bench_command(app);
  infinipot::cli::add_profile_command(app);
  infinipot::cli::add_tune_command(app);
  infinipot::cli::add_policies_command(app);
  infinipot::cli::add_serve_command(app);
  infinipot::cli::add_chat_command(app);
  infinipot::cli::add_bench_chat_command(app);
  try {
    // CLI11 reports an unknown subcommand as "A subcommand is required": name it instead.
    if (argc > 1 && argv[1][0] != '-') {
      std::string known;
      bool found = false;
      for (const CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) {
        known += (known.empty() ? "" : ", ") + sub->get_name();
        found = found || sub->check_name(argv[1]);
      }
      if (!found)
        throw CLI::ExtrasError("unknown subcommand '" + std::string(argv[1]) + "'; expected one of: " + known,
                               CLI::ExitCodes::ExtrasError);
    }
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help prints and succeeds; every usage error exits 2 (documented in README).
    return app.exit(e) == 0 ? 0 : 2;
  } catch (const infinipot::cl::BudgetError& e) {
    std::fprintf(stderr, "\nerror: %s\n", infinipot::cli::worded(e).c_str());
    return 3;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "\nerror: %s\n", infinipot::cli::worded(e).c_str());
    return 1;
  }
  infinipot::cl::profile_report();
  return 0;
}
