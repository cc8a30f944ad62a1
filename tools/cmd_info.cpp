// infinipot devices | inspect | tokenize
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model_loader/gguf.h"
#include "model_loader/inspect.h"
#include "model_loader/model_family.h"
#include "model_loader/quant.h"
#include "model_loader/tokenizer.h"
#include "runtime/device.h"
#include "runtime/icd_check.h"
#include "runtime/device_memory.h"
#include "runtime/tuning.h"
#include "tools/cli_common.h"

namespace infinipot::cli {

void add_devices_command(CLI::App& app) {
  auto* sub = app.add_subcommand("devices", "List OpenCL platforms and devices");
  auto json = std::make_shared<bool>(false);
  sub->add_flag("--json", *json, "Print one JSON object");
  sub->callback([json] {
    auto devices = cl::list_devices();
    if (*json) {
      nlohmann::json out = {{"devices", nlohmann::json::array()}};
      for (const auto& d : devices) {
        auto j = d.to_json();
        j["tuning"] = cl::lookup_tuning(d).to_json();
        out["devices"].push_back(j);
      }
      std::cout << out.dump(2) << std::endl;
      return;
    }
    if (devices.empty()) {
      std::cout << "no OpenCL devices found (is an ICD installed? try `apt-get install pocl-opencl-icd`)\n"
                << cl::check_icd().describe();
      return;
    }
    for (const auto& d : devices) {
      std::printf("%d: %s [%s]\n   platform: %s | %s | driver %s\n", d.index, d.name.c_str(), d.type.c_str(),
                  d.platform_name.c_str(), d.opencl_c_version.c_str(), d.driver_version.c_str());
      std::printf("   global %s, local %s, max alloc %s, %u compute units, fp16 %s, subgroups %s, tuning %s/%s\n",
                  cl::format_bytes(d.global_mem_bytes).c_str(), cl::format_bytes(d.local_mem_bytes).c_str(),
                  cl::format_bytes(d.max_alloc_bytes).c_str(), d.compute_units, d.fp16 ? "yes" : "no",
                  d.subgroups ? "yes" : "no", cl::lookup_tuning(d).vendor_key.c_str(),
                  cl::lookup_tuning(d).device_key.c_str());
    }
  });
}

namespace {

// The family table (model_loader/model_family.h) as a user reads it: what each family's files
// may hold beyond the llama block.
void print_families(bool json) {
  nlohmann::json rows = nlohmann::json::array();
  for (const ModelFamily& f : model_families()) {
    std::vector<std::string> has;
    if (f.rope_neox) has.push_back("NEOX RoPE");
    if (f.rope_freqs) has.push_back("RoPE factors (rope_freqs)");
    if (f.qkv_bias) has.push_back("q/k/v biases");
    if (f.qk_norm) has.push_back("QK-norm");
    if (f.post_norms) has.push_back("post-norms");
    if (f.fused_qkv) has.push_back("fused attn_qkv");
    if (f.fused_gate_up) has.push_back("fused gate|up");
    if (f.gelu) has.push_back("GELU-tanh");
    if (f.embd_scale_sqrt) has.push_back("scaled embeddings");
    if (*f.extra) has.push_back(f.extra);
    rows.push_back({{"architecture", f.arch}, {"models", f.models}, {"features", has}});
  }
  if (json) {
    std::cout << nlohmann::json{{"families", rows}, {"weight_types", quant::device_type_names()}}.dump(2) << std::endl;
    return;
  }
  std::printf("%-8s  %-60s  %s\n", "family", "models", "beyond the llama block");
  for (const auto& r : rows) {
    std::string has;
    for (const auto& h : r["features"]) has += (has.empty() ? "" : ", ") + h.get<std::string>();
    std::printf("%-8s  %-60s  %s\n", r["architecture"].get<std::string>().c_str(), r["models"].get<std::string>().c_str(),
                has.c_str());
  }
  std::printf("weight types: %s\n", quant::device_type_names().c_str());
}

}  // namespace

void add_inspect_command(CLI::App& app) {
  auto* sub = app.add_subcommand("inspect", "Validate a GGUF model and print its metadata and tensors");
  struct Opts {
    std::string model;
    bool json = false, families = false;
  };
  auto o = std::make_shared<Opts>();
  auto* model = sub->add_option("-m,--model", o->model, "GGUF model file");
  auto* families = sub->add_flag("--families", o->families,
                                 "List the model families (general.architecture) and weight types this build runs");
  model->excludes(families);
  sub->add_flag("--json", o->json, "Print one JSON object {metadata, tensors}");
  sub->callback([o] {
    if (o->families) return print_families(o->json);
    if (o->model.empty()) throw CLI::RequiredError("--model (or --families)");
    auto file = gguf::GgufFile::open(o->model);
    if (o->json) std::cout << inspect_json(file).dump(2) << std::endl;
    else std::cout << inspect_text(file);
  });
}

void add_tokenize_command(CLI::App& app) {
  auto* sub = app.add_subcommand("tokenize", "Tokenize text with the model's tokenizer (special tokens parsed, no BOS)");
  struct Opts {
    std::string model, prompt, file;
    bool json = false;
  };
  auto o = std::make_shared<Opts>();
  sub->add_option("-m,--model", o->model, "GGUF model file")->required();
  auto* p = sub->add_option("-p,--prompt", o->prompt, "Text to tokenize");
  auto* f = sub->add_option("-f,--file", o->file, "File whose text to tokenize");
  p->excludes(f);
  sub->add_flag("--json", o->json, "Print {\"tokens\": [ids]}");
  sub->callback([o, p, f] {
    if (!*p && !*f) throw std::invalid_argument("tokenize needs text: give -p TEXT or -f FILE");
    const std::string text = *f ? read_text_file(o->file, "input file") : o->prompt;
    auto file = gguf::GgufFile::open(o->model);
    auto tok = Tokenizer::from_gguf(file);
    auto ids = tok.encode(text, /*add_bos=*/false, /*parse_special=*/true);
    if (o->json) {
      std::cout << nlohmann::json{{"tokens", ids}}.dump() << std::endl;
      return;
    }
    for (TokenId id : ids) {
      nlohmann::json piece = tok.decode_token(id, true);
      std::cout << id << " " << piece.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    }
    std::cout << ids.size() << " tokens\n";
  });
}

}  // namespace infinipot::cli
