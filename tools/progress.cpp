#include "tools/progress.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>

namespace infinipot::cli {
namespace {
int terminal_width() {
  winsize w{};
  return ioctl(STDERR_FILENO, TIOCGWINSZ, &w) == 0 && w.ws_col > 20 ? w.ws_col : 100;
}
}  // namespace

std::string fmt_duration(double s) {
  if (!(s >= 0) || !std::isfinite(s)) return "?";
  char buf[32];
  const long t = std::lround(s);
  if (t >= 3600) std::snprintf(buf, sizeof buf, "%ldh%02ldm", t / 3600, (t / 60) % 60);
  else if (t >= 60) std::snprintf(buf, sizeof buf, "%ldm%02lds", t / 60, t % 60);
  else std::snprintf(buf, sizeof buf, "%lds", t);
  return buf;
}

bool progress_wanted(bool json) { return !json && isatty(STDERR_FILENO) == 1; }

std::string prefill_status(const PrefillProgress& p) {
  const double tps = p.elapsed_s > 0 ? p.done / p.elapsed_s : 0;
  const double left = tps > 0 ? (p.total - p.done) / tps : NAN;
  char buf[256];
  std::snprintf(buf, sizeof buf, "prefill %d/%d tokens (%d%%) | %.0f tok/s | %s left", p.done, p.total,
                p.total > 0 ? static_cast<int>(100.0 * p.done / p.total) : 0, tps, fmt_duration(left).c_str());
  std::string s = buf;
  if (p.cycles > 0) s += " | " + std::to_string(p.cycles) + " pot cycles";
  return s;
}

void Progress::status(const std::string& line) {
  if (!enabled_) return;
  const std::string s = line.substr(0, terminal_width() - 1);
  std::fprintf(stderr, "\r\033[K%s", s.c_str());
  std::fflush(stderr);
  shown_ = true;
}

void Progress::line(const std::string& text) {
  if (shown_) std::fprintf(stderr, "\r\033[K");
  std::fprintf(stderr, "%s\n", text.c_str());
  std::fflush(stderr);
  shown_ = false;
}

void Progress::done() {
  if (shown_) {
    std::fprintf(stderr, "\r\033[K");
    std::fflush(stderr);
  }
  shown_ = false;
}

}  // namespace infinipot::cli
