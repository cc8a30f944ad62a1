// infinipot perplexity: as llama.cpp's llama-perplexity computes it.
#include <cstdio>
#include <iostream>
#include <memory>

#include "engine/engine.h"
#include "tools/cli_common.h"

namespace infinipot::cli {

void add_perplexity_command(CLI::App& app) {
  auto* sub = app.add_subcommand("perplexity", "Perplexity of a text file (llama.cpp's method: windows of -c tokens, "
                                               "second half scored)");
  struct Opts {
    std::string model, file, device, device_mem, kv_type = "auto";
    int ctx = 512;
    int chunk = 0;
    int max_windows = 0;
    bool json = false;
    bool round_activations = false;
  };
  auto o = std::make_shared<Opts>();
  sub->add_option("-m,--model", o->model, "GGUF model file")->required();
  sub->add_option("-f,--file", o->file, "Text file")->required();
  sub->add_option("-c,--ctx", o->ctx, "Window size in tokens")->capture_default_str()->check(CLI::Range(16, 1 << 20));
  sub->add_option("--chunks", o->max_windows, "Score at most this many windows (0 = all)")->check(CLI::Range(0, 1 << 30));
  sub->add_option("--chunk", o->chunk, "Prefill chunk in tokens (default: from platforms/)")->check(CLI::Range(1, 1 << 16));
  sub->add_option("--device-mem", o->device_mem, "Hard cap on device memory")->check(byte_size_validator());
  sub->add_option("--device", o->device, "OpenCL device: index or name substring");
  sub->add_option("--kv-type", o->kv_type, "KV store element type: auto, f16, f32")
      ->capture_default_str()->check(CLI::IsMember({"auto", "f16", "f32"}));
  sub->add_flag("--json", o->json, "Print one JSON object");
  sub->add_flag("--round-activations", o->round_activations,
                "Round each product's input as llama.cpp's CPU backend quantizes it (8-bit blocks: Q8_K for "
                "K-quant weights, Q8_0 for the others; F16 for F16 weights), to compare with llama-perplexity "
                "under its numerics; less precise than the default");
  sub->callback([o] {
    std::string text = read_text_file(o->file, "text file");
    require_utf8(text, "text file '" + o->file + "'");
    EngineOptions eo = engine_options(o->model, o->device, o->device_mem, o->chunk, o->kv_type);
    eo.round_activations = o->round_activations;
    Engine engine(eo);
    // llama-perplexity tokenizes with add_special (BOS only if the model asks) and no special parsing.
    const bool add_bos = engine.file().get_bool("tokenizer.ggml.add_bos_token", false);
    auto tokens = engine.tokenizer().encode(text, add_bos, false);
    if (o->max_windows > 0 && tokens.size() > size_t(o->max_windows) * o->ctx) tokens.resize(size_t(o->max_windows) * o->ctx);
    engine.prepare(o->ctx);
    auto r = perplexity(engine, tokens, o->ctx, [&](int w, int n, double ppl) {
      if (!o->json) std::fprintf(stderr, "[%d/%d] %.4f\n", w, n, ppl);
    });
    if (o->json) {
      std::cout << nlohmann::json{{"perplexity", r.perplexity}, {"stderr", r.stderr_ppl}, {"ctx", o->ctx},
                                  {"windows", r.windows}, {"scored_tokens", r.scored_tokens},
                                  {"tokens", r.n_tokens}, {"seconds", r.seconds},
                                  {"kv_type", engine.kv_half() ? "f16" : "f32"},
                                  {"round_activations", o->round_activations},
                                  {"peak_device_bytes", engine.memory_report()["peak"]}}
                       .dump()
                << std::endl;
    } else {
      std::printf("Final estimate: PPL = %.4f +/- %.5f (%d windows of %d, %d tokens scored, %.1f s)\n", r.perplexity,
                  r.stderr_ppl, r.windows, o->ctx, r.scored_tokens, r.seconds);
    }
  });
}

}  // namespace infinipot::cli
