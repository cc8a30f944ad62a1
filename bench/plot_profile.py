#!/usr/bin/env python3
"""Draws the figure of `infinipot profile --png`: reads a trace written by `infinipot profile
--trace` and writes one PNG with

  top:    device memory over time, stacked by category (weights, kv_cache, kv_selection,
          activations, scratch, gemm), the --device-mem budget as a line, and the spans of
          each distillation cycle shaded;
  bottom: the retained-token map: for every layer (rows), which positions of the stream
          (columns: prefix, document, question, answer) the KV store holds at the end, as the
          share of the layer's KV heads that hold them.

Usage: bench/plot_profile.py TRACE.json OUT.png
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

CATEGORIES = ["weights", "kv_cache", "kv_selection", "activations", "scratch", "gemm"]
OLD_NAMES = {"kv_selection": "pot_scoring"}  # traces written before the category was renamed


def memory_series(events):
    times, by_cat, budget = [], {c: [] for c in CATEGORIES}, None
    for e in events:
        if e.get("ph") != "C":
            continue
        if e["name"] == "device memory (bytes)":
            times.append(e["ts"] / 1e6)
            for c in CATEGORIES:
                by_cat[c].append(e["args"].get(c, e["args"].get(OLD_NAMES.get(c, c), 0)) / 2**20)
        elif e["name"] == "device memory budget (bytes)":
            budget = e["args"]["budget"] / 2**20
    return times, by_cat, budget


def retained_image(meta, columns=600):
    stream = max(1, int(meta.get("stream_tokens", 1)))
    layers = meta.get("layers", [])
    cols = min(columns, stream)
    image = []
    for heads in layers:
        row = [0.0] * cols
        for positions in heads:
            for p in positions:
                if 0 <= p < stream:
                    row[p * cols // stream] += 1.0
        per_col = stream / cols  # positions per column
        image.append([v / (len(heads) * per_col) for v in row] if heads else row)
    return image, stream


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: plot_profile.py TRACE.json OUT.png")
    with open(sys.argv[1]) as f:
        trace = json.load(f)
    events = trace["traceEvents"]
    meta = trace.get("infinipot", {})

    fig, (top, bottom) = plt.subplots(2, 1, figsize=(11, 8), gridspec_kw={"height_ratios": [1, 1.2]})
    times, by_cat, budget = memory_series(events)
    if times:
        # Steps: a counter holds its value until the next sample.
        top.stackplot(times, [by_cat[c] for c in CATEGORIES], labels=CATEGORIES, step="post", alpha=0.85)
        if budget:
            top.axhline(budget, color="black", linestyle="--", linewidth=1, label="budget (--device-mem)")
        end = max([times[-1]] + [(e["ts"] + e.get("dur", 0)) / 1e6 for e in events if e.get("ph") == "X"])
        top.set_xlim(0, end)
    first = True
    for e in events:
        if e.get("ph") == "X" and e.get("name") == "distillation":
            top.axvspan(e["ts"] / 1e6, (e["ts"] + e["dur"]) / 1e6, color="red", alpha=0.15,
                        label="distillation" if first else None)
            first = False
    top.set_xlabel("time (s)")
    top.set_ylabel("device memory (MiB)")
    top.set_title("Device memory by category")
    top.legend(loc="upper left", fontsize=8, ncol=2)

    image, stream = retained_image(meta)
    if image:
        im = bottom.imshow(image, aspect="auto", interpolation="nearest", cmap="viridis", vmin=0, vmax=1,
                           extent=(0, stream, len(image) - 0.5, -0.5))
        fig.colorbar(im, ax=bottom, label="share of KV heads holding it")
        prompt = meta.get("prompt_tokens")
        if prompt:
            bottom.axvline(prompt, color="white", linestyle=":", linewidth=1)
    bottom.set_xlabel("stream position (prefix, document, question, answer)")
    bottom.set_ylabel("layer")
    pot = meta.get("pot") or {}
    bottom.set_title("What the KV store holds at the end" +
                     (f" (pot {pot.get('capacity')} entries, policy {pot.get('policy')}, "
                      f"{pot.get('cycles')} distillations)" if pot else " (full cache)"))
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=100)


if __name__ == "__main__":
    main()
