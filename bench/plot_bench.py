#!/usr/bin/env python3
"""Plots `infinipot bench` rows against context length: peak memory (device bytes for
infinipot, peak RSS for llama.cpp, which runs on the host), prefill tok/s and decode tok/s,
one line per engine/policy/pot. Rows that did not fit the cap are marked on the memory panel.
When files give the same series the same length, the later file's row is drawn (a rerun wins).

Usage: bench/plot_bench.py ROWS.json [ROWS.json ...] OUT.png
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def label(r):
    if r.get("engine") == "llama.cpp":
        return "llama.cpp (full cache, host RSS)"
    if r.get("pot") is None:
        return "infinipot full cache"
    return f"infinipot {r['policy']} pot {r['pot']}"


def main():
    if len(sys.argv) < 3:
        sys.exit("usage: plot_bench.py ROWS.json [ROWS.json ...] OUT.png")
    rows = []
    for path in sys.argv[1:-1]:
        with open(path) as f:
            rows += json.load(f)
    latest = {}
    for r in rows:
        latest[(label(r), r["ctx"])] = r
    series = {}
    for (name, _), r in latest.items():
        series.setdefault(name, []).append(r)
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.5))
    titles = ["peak memory (MiB)", "prefill (tok/s)", "decode (tok/s)"]
    for name, rs in sorted(series.items()):
        rs.sort(key=lambda r: r["ctx"])
        ok = [r for r in rs if "error" not in r]
        xs = [r["ctx"] for r in ok]
        mem = [(r.get("peak_device_bytes") or r.get("host_peak_rss") or 0) / 2**20 for r in ok]
        if r_is_llama := (rs[0].get("engine") == "llama.cpp"):
            mem = [r.get("host_peak_rss", 0) / 2**20 for r in ok]
        style = "--" if r_is_llama else "-"
        axes[0].plot(xs, mem, style, marker="o", label=name)
        axes[1].plot(xs, [r["prefill_tok_s"] for r in ok], style, marker="o", label=name)
        axes[2].plot(xs, [r["decode_tok_s"] for r in ok], style, marker="o", label=name)
        for r in rs:
            if "error" in r:
                axes[0].annotate("does not fit", (r["ctx"], 0), rotation=90, fontsize=7, va="bottom")
    for ax, t in zip(axes, titles):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("context (tokens)")
        ax.set_title(t)
        ax.grid(True, alpha=0.3)
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(sys.argv[-1], dpi=100)


if __name__ == "__main__":
    main()
