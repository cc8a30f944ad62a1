// infinipot devices | inspect | tokenize
#include <cstdio>
#include <iostream>
#include <memory>

#include "model_loader/gguf.h"
#include "model_loader/inspect.h"
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

void add_inspect_command(CLI::App& app) {
  auto* sub = app.add_subcommand("inspect", "Validate a GGUF model and print its metadata and tensors");
  struct Opts {
    std::string model;
    bool json = false;
  };
  auto o = std::make_shared<Opts>();
  sub->add_option("-m,--model", o->model, "GGUF model file")->required();
  sub->add_flag("--json", o->json, "Print one JSON object {metadata, tensors}");
  sub->callback([o] {
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
