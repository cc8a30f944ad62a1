// infinipot tune: searches this device's tuning values (platforms/tuning.json's keys: GEMM
// backend, prefill chunk, attention tiles, integer matvec, matvec and norm work-group sizes) and CLBlast's
// Xgemm parameters, by timing the real model, and writes the winners as data under the
// device's entry of platforms/tuning.json (--write). The search is coordinate descent from
// the current values: one key at a time over its candidates, the others fixed, each scored by
// the phase it shapes (prefill time for GEMM, chunk and attention; decode time for matvec;
// both for the norms). A candidate the device cannot run (a work-group too large, a CLBlast
// configuration it refuses) is reported and skipped.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <random>

#include "runtime/context.h"
#include "runtime/gemm_layer.h"
#include "runtime/ops.h"
#include "tools/cli_common.h"

namespace infinipot::cli {
nlohmann::json bench_gemm(cl::Context& ctx, int reps, int m);  // bench/bench_gemm.cpp
namespace {

using Clock = std::chrono::steady_clock;

struct TuneOpts {
  std::string model, device, write, kv_type = "auto";
  int prefill = 512, decode = 16, reps = 2, clblast_candidates = 8;
  bool json = false, keys = false;
};

struct Timing {
  double prefill_s = 0, decode_s = 0;
  std::string error;  // non-empty: the candidate does not run here
};

// Best of `reps` timings of a prefill of o.prefill random tokens and o.decode decode steps, after
// a warm-up (kernel builds) — the real model, under the candidate tuning.
Timing measure(const TuneOpts& o, const nlohmann::json& overrides) {
  Timing t;
  try {
    EngineOptions eo = engine_options(o.model, o.device, "", 0, o.kv_type);
    eo.tuning_overrides = overrides;
    Engine engine(eo);
    engine.prepare(o.prefill + o.decode + 1);
    std::mt19937 rng(7);
    std::vector<TokenId> prompt(o.prefill);
    for (auto& x : prompt) x = static_cast<TokenId>(rng() % engine.config().n_vocab);
    auto run = [&](Timing& out) {
      engine.kv().reset();
      const auto t0 = Clock::now();
      for (int i = 0; i < o.prefill; i += engine.chunk())
        engine.forward().eval(std::vector<TokenId>(prompt.begin() + i, prompt.begin() + std::min(o.prefill, i + engine.chunk())));
      (void)engine.forward().last_logits();
      const auto t1 = Clock::now();
      for (int i = 0; i < o.decode; ++i) {
        engine.forward().eval({prompt[i]});
        (void)engine.forward().last_logits();
      }
      out.prefill_s = std::chrono::duration<double>(t1 - t0).count();
      out.decode_s = std::chrono::duration<double>(Clock::now() - t1).count();
    };
    Timing warm;
    run(warm);
    t.prefill_s = t.decode_s = 1e30;
    for (int r = 0; r < o.reps; ++r) {
      Timing x;
      run(x);
      t.prefill_s = std::min(t.prefill_s, x.prefill_s);
      t.decode_s = std::min(t.decode_s, x.decode_s);
    }
  } catch (const std::exception& e) {
    t.error = worded(e);
  }
  return t;
}

const cl::TuningKey& key_of(const std::string& name) {
  for (const cl::TuningKey& k : cl::tuning_keys())
    if (name == k.name) return k;
  throw std::logic_error("no tuning key '" + name + "'");
}

// What a key's value is judged by (its row's Judge).
double score(const std::string& key, const Timing& t) {
  switch (key_of(key).judge) {
    case cl::TuningKey::Judge::Decode: return t.decode_s;
    case cl::TuningKey::Judge::Both: return t.prefill_s + t.decode_s;
    case cl::TuningKey::Judge::Prefill: break;
  }
  return t.prefill_s;
}

const char* judge_name(cl::TuningKey::Judge j) {
  return j == cl::TuningKey::Judge::Decode ? "decode" : j == cl::TuningKey::Judge::Both ? "prefill + decode" : "prefill";
}

// `tune --keys`: the table of keys as Markdown (docs/design.md's table is its output).
void print_keys() {
  std::printf("| key | the file may give | `tune` tries | judged by | what it does |\n|---|---|---|---|---|\n");
  for (const cl::TuningKey& k : cl::tuning_keys()) {
    std::string tried;
    for (const nlohmann::json& v : k.candidates) tried += (tried.empty() ? "" : ", ") + v.dump();
    std::printf("| `%s` | %s | %s | %s | %s |\n", k.name, k.values, tried.c_str(), judge_name(k.judge), k.doc);
  }
}

// Xgemm configurations that satisfy CLBlast's constraints (MWG a multiple of MDIMC*VWM and of
// MDIMA*VWM, NWG of NDIMC*VWN and of NDIMB*VWN, KWG of KWI, MDIMC*NDIMC == MDIMA*NDIMB),
// shuffled with a fixed seed; the first n are tried.
std::vector<nlohmann::json> clblast_xgemm_candidates(int n) {
  std::vector<nlohmann::json> all;
  for (int mwg : {32, 64, 128})
    for (int nwg : {32, 64, 128})
      for (int kwg : {16, 32})
        for (int mdim : {8, 16})
          for (int ndim : {8, 16})
            for (int vwm : {1, 2, 4})
              for (int vwn : {1, 2, 4})
                for (int sab : {0, 1}) {
                  if (mwg % (mdim * vwm) || nwg % (ndim * vwn)) continue;
                  all.push_back({{"GEMMK", 0}, {"KREG", 1}, {"KWG", kwg}, {"KWI", 2}, {"MDIMA", mdim}, {"MDIMC", mdim},
                                 {"MWG", mwg}, {"NDIMB", ndim}, {"NDIMC", ndim}, {"NWG", nwg}, {"SA", sab}, {"SB", sab},
                                 {"STRM", 0}, {"STRN", 0}, {"VWM", vwm}, {"VWN", vwn}});
                }
  std::shuffle(all.begin(), all.end(), std::mt19937(11));
  all.resize(std::min<size_t>(all.size(), size_t(n)));
  return all;
}

// GFLOP/s of CLBlast on the model's largest prefill product under an Xgemm configuration
// (-1 when the device refuses it).
double clblast_gflops(const TuneOpts& o, const nlohmann::json& xgemm, std::string& error) {
  try {
    EngineOptions eo = engine_options(o.model, o.device, "", 0, o.kv_type);
    eo.tuning_overrides = {{"gemm_backend", "clblast"}, {"clblast", {{"Xgemm", xgemm}}}};
    Engine engine(eo);
    engine.prepare(64);
    const nlohmann::json rows = bench_gemm(engine.context(), o.reps, o.prefill);
    double sum = 0;
    int n = 0;
    for (const auto& r : rows)
      if (r["backend"] == "clblast") sum += r["gflops"].get<double>(), ++n;
    return n ? sum / n : -1;
  } catch (const std::exception& e) {
    error = worded(e);
    return -1;
  }
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

void tune(const TuneOpts& o) {
  if (o.keys) return print_keys();
  if (o.model.empty()) throw CLI::RequiredError("--model");
  if (o.prefill < 16 || o.decode < 1 || o.reps < 1)
    throw CLI::ValidationError("--prefill must be >= 16, --decode >= 1 and --reps >= 1");
  Engine probe(engine_options(o.model, o.device, "", 0, o.kv_type));
  probe.prepare(64);
  const cl::Tuning start = probe.context().tuning();
  const cl::DeviceInfo dev = probe.context().device();
  nlohmann::json best = start.to_json();
  for (const char* k : {"vendor", "device"}) best.erase(k);
  nlohmann::json log = nlohmann::json::array();
  auto say = [&](const std::string& s) {
    if (!o.json) std::fprintf(stderr, "%s\n", s.c_str());
  };
  say("tuning " + dev.name + " (entry " + start.vendor_key + "/" + start.device_key + ")");
  const Timing base = measure(o, best);
  if (!base.error.empty()) throw std::runtime_error("the current tuning does not run: " + base.error);
  char line[256];
  std::snprintf(line, sizeof line, "current: prefill %d tokens %.3f s, decode %d tokens %.3f s", o.prefill,
                base.prefill_s, o.decode, base.decode_s);
  say(line);

  // CLBlast's own parameters first, so the backend comparison sees CLBlast at its best here.
  if (o.clblast_candidates > 0) {
    std::string err;
    double best_gf = clblast_gflops(o, start.clblast.value("Xgemm", nlohmann::json::object()), err);
    nlohmann::json best_x = start.clblast.value("Xgemm", nlohmann::json(nullptr));
    std::snprintf(line, sizeof line, "clblast Xgemm, current parameters: %.1f GFLOP/s", best_gf);
    say(line);
    for (const auto& x : clblast_xgemm_candidates(o.clblast_candidates)) {
      std::string e;
      const double gf = clblast_gflops(o, x, e);
      log.push_back({{"key", "clblast.Xgemm"}, {"value", x}, {"gflops", gf}, {"error", e}});
      std::snprintf(line, sizeof line, "clblast Xgemm MWG=%d NWG=%d KWG=%d MDIMC=%d NDIMC=%d VWM=%d VWN=%d: %s",
                    x["MWG"].get<int>(), x["NWG"].get<int>(), x["KWG"].get<int>(), x["MDIMC"].get<int>(),
                    x["NDIMC"].get<int>(), x["VWM"].get<int>(), x["VWN"].get<int>(),
                    gf > 0 ? (std::to_string(gf).substr(0, 6) + " GFLOP/s").c_str() : ("refused: " + e.substr(0, 80)).c_str());
      say(line);
      if (gf > best_gf) best_gf = gf, best_x = x;
    }
    if (best_x.is_object() && !best_x.empty()) best["clblast"] = {{"Xgemm", best_x}};
  }

  Timing cur = measure(o, best);
  for (const cl::TuningKey& tk : cl::tuning_keys()) {
    const char* key = tk.name;
    for (const auto& v : key_of(key).candidates) {
      if (best[key] == v) continue;
      nlohmann::json trial = best;
      trial[key] = v;
      const Timing t = measure(o, trial);
      log.push_back({{"key", key}, {"value", v}, {"prefill_s", t.prefill_s}, {"decode_s", t.decode_s},
                     {"error", t.error}});
      if (!t.error.empty()) {
        say(std::string(key) + " = " + v.dump() + ": does not run here (" + t.error.substr(0, 100) + ")");
        continue;
      }
      std::snprintf(line, sizeof line, "%s = %s: prefill %.3f s, decode %.3f s%s", key, v.dump().c_str(), t.prefill_s,
                    t.decode_s, score(key, t) < 0.97 * score(key, cur) ? "  <- better" : "");
      say(line);
      // A 3% margin: a change must beat the noise of a shared machine to replace the value.
      if (score(key, t) < 0.97 * score(key, cur)) best[key] = v, cur = t;
    }
  }
  nlohmann::json result = {{"device", dev.name},
                           {"entry", {{"vendor", start.vendor_key}, {"device", start.device_key}}},
                           {"before", {{"prefill_s", base.prefill_s}, {"decode_s", base.decode_s}}},
                           {"after", {{"prefill_s", cur.prefill_s}, {"decode_s", cur.decode_s}}},
                           {"winners", best},
                           {"tried", log}};
  if (!o.write.empty()) {
    std::ifstream in(o.write);
    if (!in) throw std::invalid_argument("--write: cannot read '" + o.write + "' (give platforms/tuning.json)");
    nlohmann::json data;
    try {
      data = nlohmann::json::parse(in);
    } catch (const std::exception& e) {
      throw std::invalid_argument("--write: '" + o.write + "' is not JSON: " + e.what());
    }
    if (start.vendor_key == "default" || !data["vendors"].contains(start.vendor_key))
      throw std::invalid_argument("--write: this device's vendor matches no entry of 'vendor_aliases' in '" + o.write +
                                  "'; add one for it first, then rerun");
    nlohmann::json entry = best;
    char note[256];
    std::snprintf(note, sizeof note, "infinipot tune: prefill %d tokens %.3f -> %.3f s, decode %d tokens %.3f -> %.3f s",
                  o.prefill, base.prefill_s, cur.prefill_s, o.decode, base.decode_s, cur.decode_s);
    entry["_measured"] = note;
    data["vendors"][start.vendor_key]["devices"][lower(dev.name)] = entry;
    std::ofstream out(o.write);
    out << data.dump(2) << "\n";
    if (!out) throw std::runtime_error("--write: writing '" + o.write + "' failed");
    say("wrote the winners under vendors." + start.vendor_key + ".devices[\"" + lower(dev.name) + "\"] of " + o.write +
        " (rebuild to embed it)");
  }
  if (o.json) std::cout << result.dump(1) << std::endl;
  else {
    std::printf("| key | before | after |\n|---|---|---|\n");
    const nlohmann::json before = start.to_json();
    for (const cl::TuningKey& k : cl::tuning_keys())
      std::printf("| %s | %s | %s |\n", k.name, before[k.name].dump().c_str(), best[k.name].dump().c_str());
    std::printf("\nprefill %d tokens: %.3f s -> %.3f s; decode %d tokens: %.3f s -> %.3f s\n", o.prefill, base.prefill_s,
                cur.prefill_s, o.decode, base.decode_s, cur.decode_s);
  }
}

}  // namespace

void add_tune_command(CLI::App& app) {
  auto* sub = app.add_subcommand("tune", "Search this device's tuning values (GEMM backend and CLBlast parameters, "
                                         "prefill chunk, attention tiles, work-group sizes) and write the winners");
  auto o = std::make_shared<TuneOpts>();
  sub->add_option("-m,--model", o->model, "GGUF model the timings run (required unless --keys)");
  sub->add_flag("--keys", o->keys, "Print the tuning keys as a Markdown table (values, candidates, what each does)");
  sub->add_option("--device", o->device, "OpenCL device: index or name substring");
  sub->add_option("--write", o->write, "platforms/tuning.json to write the winners into (under this device's entry)");
  sub->add_option("--prefill", o->prefill, "Prefill tokens per timing")->capture_default_str();
  sub->add_option("--decode", o->decode, "Decode steps per timing")->capture_default_str();
  sub->add_option("-r,--reps", o->reps, "Timings per candidate (the best counts)")->capture_default_str();
  sub->add_option("--clblast", o->clblast_candidates, "CLBlast Xgemm configurations to try (0: none)")
      ->capture_default_str()->check(CLI::Range(0, 1000));
  sub->add_option("--kv-type", o->kv_type, "KV element type: auto, f16, f32")->capture_default_str()
      ->check(CLI::IsMember({"auto", "f16", "f32"}));
  sub->add_flag("--json", o->json, "Print the result (winners, every candidate tried) as JSON");
  sub->callback([o] { tune(*o); });
}

}  // namespace infinipot::cli
