// Helpers shared by the infinipot subcommands.
#pragma once
#include <string>
#include <CLI/CLI.hpp>

#include "engine/engine.h"
#include "model_loader/setting_names.h"

namespace infinipot::cli {

// Reads a whole text file; errors name the path and the reason (missing, a directory, ...).
std::string read_text_file(const std::string& path, const std::string& what);
// Throws std::invalid_argument naming `what` and the byte offset of the first invalid
// UTF-8 sequence, with what to do about it.
void require_utf8(const std::string& text, const std::string& what);
// A data file (e.g. "data/perplexity.txt") relative to the working directory, else to the
// source tree this program was built from; rel itself when neither has it.
std::string data_path(const std::string& rel);
// The commit this program was built from (cmake/build_id.cmake): a 12-digit hash, with
// "+modified" when its sources differed from that commit, or "unknown" outside a checkout.
// Records and benchmark rows carry it, so every figure names the code that produced it.
const char* build_id();
// The engine the flags every model command shares ask for (--device-mem parsed here).
EngineOptions engine_options(const std::string& model, const std::string& device, const std::string& device_mem,
                             int chunk, const std::string& kv_type);
// CLI11 validator for --device-mem sizes ("256M", "1.5G").
CLI::Validator byte_size_validator();
// --keep N or --keep auto: a count of entries (1..2^24) into *keep, auto as kKeepAuto
// (pot/policy_spec.h); anything else is refused naming both forms.
CLI::Option* add_keep_option(CLI::App* sub, int* keep, const std::string& help);

// The CLI's names for the settings lower layers name as {id} (model_loader/setting_names.h).
const SettingNames& setting_names();
// An error's message in the CLI's words (--pot, -n, --device-mem).
std::string worded(const std::exception& e);

void add_devices_command(CLI::App& app);
void add_inspect_command(CLI::App& app);
void add_tokenize_command(CLI::App& app);
void add_run_command(CLI::App& app);
void add_perplexity_command(CLI::App& app);
void add_nih_command(CLI::App& app);
void add_bench_command(CLI::App& app);
void add_profile_command(CLI::App& app);
void add_tune_command(CLI::App& app);
void add_policies_command(CLI::App& app);
void add_serve_command(CLI::App& app);
void add_chat_command(CLI::App& app);
void add_bench_chat_command(CLI::App& app);

}  // namespace infinipot::cli
