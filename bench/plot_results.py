#!/usr/bin/env python3
"""Draws the figures of `infinipot nih` results: reads one or more JSONL files (one record per
trial, engine/nih.h) and writes PNGs into --out-dir, per task and haystack:

  heatmap--TASK--HAYSTACK--CONFIG.png  lengths (x) by needle depths (y), colour = share of the
                                       trials found, each cell "found/total";
  length--TASK--HAYSTACK.png           share found against document length (log2 axis, in
                                       K = 1024 tokens), one line per config;
  ablation--TASK--HAYSTACK.png         share found over all lengths, one bar per config (the
                                       --ablation list, in its order, else every config), n on
                                       each bar.

The records counted are those `infinipot nih` tabulates: the latest record of each trial
(task, config, haystack, length, depth, trial, seed), where an answer is never replaced by a
later error (latest_records in engine/nih_results.cpp); a record without "task" is the
passkey task's; trials that ended in an error are not in the totals. Files are read in the
order given, so a later file's records are the later ones.

Usage: bench/plot_results.py RESULTS.jsonl [MORE.jsonl ...] --out-dir DIR
                             [--ablation CONFIG[,CONFIG...]]
Exit status 2 for a missing or empty file, a line that is not a JSON record (named), or an
--ablation config that is in none of the files.
"""
import argparse
import hashlib
import json
import math
import os
import re
import sys

DEFAULT_TASK = "passkey"  # engine/tasks/task_registry.h kDefaultTask


class InputError(Exception):
    """A problem with the command line or the files: exit 2 with the message."""


def trial_id(r):
    """The record's trial identity, or None when a field is missing or of the wrong type (the
    records nih_results.cpp's trial_id() gives "" for, which are not counted either)."""
    def number(v):
        return isinstance(v, (int, float)) and not isinstance(v, bool)
    task = r.get("task", DEFAULT_TASK)
    if not isinstance(task, str):
        task = DEFAULT_TASK
    config, hay = r.get("config"), r.get("haystack")
    length, depth, trial, seed = r.get("length"), r.get("depth"), r.get("trial"), r.get("seed")
    if not (isinstance(config, str) and isinstance(hay, str) and all(number(v) for v in (length, depth, trial, seed))):
        return None
    # The depth as nih's key writes it (fmt_g: %.6g), so the same trials match.
    return (task, config, hay, int(length), "%.6g" % depth, int(trial), int(seed))


def read_records(paths):
    records = []
    for path in paths:
        if not os.path.isfile(path):
            raise InputError(f"results file '{path}' does not exist (give the --out file of `infinipot nih`)")
        n_before = len(records)
        with open(path, encoding="utf-8", errors="replace") as f:
            for line_no, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    r = json.loads(line)
                except json.JSONDecodeError as e:
                    raise InputError(f"results file '{path}': line {line_no} is not a JSON record ({e.msg}); "
                                     "fix or remove that line")
                if not isinstance(r, dict):
                    raise InputError(f"results file '{path}': line {line_no} is not a JSON record (an object)")
                records.append(r)
        if len(records) == n_before:
            raise InputError(f"results file '{path}' is empty: no records to plot")
    return records


def latest_records(records):
    """The latest record of each trial; an answer is never replaced by a later error."""
    out, at = [], {}
    for r in records:
        tid = trial_id(r)
        if tid is None:
            continue
        if tid not in at:
            at[tid] = len(out)
            out.append(r)
        elif "error" not in r or "error" in out[at[tid]]:
            out[at[tid]] = r
    return out


class Tally:
    def __init__(self):
        self.found = self.total = self.errors = 0

    def add(self, r):
        if "error" in r:
            self.errors += 1
        else:
            self.total += 1
            self.found += r.get("found") is True

    def share(self):
        return self.found / self.total if self.total else math.nan


def summarize(records):
    """{(task, haystack): {"configs": [...], "lengths": set, "depths": set, "cells": {(config,
    length, depth): Tally}}}, groups and configs in first-seen order."""
    groups = {}
    for r in latest_records(records):
        task, config, hay, length, _, _, _ = trial_id(r)
        g = groups.setdefault((task, hay), {"configs": [], "lengths": set(), "depths": set(), "cells": {}})
        if config not in g["configs"]:
            g["configs"].append(config)
        g["lengths"].add(length)
        g["depths"].add(float(r["depth"]))
        g["cells"].setdefault((config, length, float(r["depth"])), Tally()).add(r)
    return groups


def tally_of(g, config, length=None, depth=None):
    t = Tally()
    for (c, l, d), cell in g["cells"].items():
        if c == config and (length is None or l == length) and (depth is None or d == depth):
            t.found += cell.found
            t.total += cell.total
            t.errors += cell.errors
    return t


def length_label(n):
    return f"{n // 1024}K" if n % 1024 == 0 else f"{n / 1024:.3g}K"


def slug(text):
    """A file-name part: ':' -> '_', '=' -> '-', anything else outside [A-Za-z0-9._-] -> '_'."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", text.replace("=", "-"))


def file_names(keys, make):
    """Deterministic names for keys; two keys whose names would collide each get a hash of
    their own text appended, so no figure overwrites another."""
    names = {k: make(k) for k in keys}
    seen = {}
    for n in names.values():
        seen[n] = seen.get(n, 0) + 1
    for k, n in names.items():
        if seen[n] > 1:
            digest = hashlib.sha1("\t".join(k).encode()).hexdigest()[:8]
            names[k] = n[:-len(".png")] + "-" + digest + ".png"
    return names


def title(task, hay):
    return hay if task == DEFAULT_TASK else f"{task} on {hay}"


def heatmap(plt, g, task, hay, config, path):
    lengths, depths = sorted(g["lengths"]), sorted(g["depths"])
    grid, labels = [], []
    for d in depths:
        row, row_labels = [], []
        for l in lengths:
            t = tally_of(g, config, l, d)
            row.append(t.share())
            if t.total == 0 and t.errors == 0:
                row_labels.append("")
            elif t.total == 0:
                row_labels.append(f"error ({t.errors})")
            else:
                row_labels.append(f"{t.found}/{t.total}" + (f"\n+{t.errors} err" if t.errors else ""))
        grid.append(row)
        labels.append(row_labels)
    fig, ax = plt.subplots(figsize=(max(4.5, 1.1 * len(lengths) + 2.5), max(3, 0.55 * len(depths) + 1.8)))
    cmap = plt.get_cmap("RdYlGn").copy()
    cmap.set_bad("lightgrey")  # no answered trial in the cell
    im = ax.imshow(grid, cmap=cmap, vmin=0, vmax=1, aspect="auto", interpolation="nearest")
    for y, row_labels in enumerate(labels):
        for x, text in enumerate(row_labels):
            ax.text(x, y, text, ha="center", va="center", fontsize=8)
    ax.set_xticks(range(len(lengths)), [length_label(l) for l in lengths])
    ax.set_yticks(range(len(depths)), ["%g" % d for d in depths])
    ax.set_xlabel("document length (tokens, K = 1024)")
    ax.set_ylabel("needle depth")
    ax.set_title(f"{title(task, hay)}: {config}", fontsize=10)
    fig.colorbar(im, ax=ax, label="share found")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def by_length(plt, g, task, hay, path):
    lengths = sorted(g["lengths"])
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    for i, config in enumerate(g["configs"]):
        xs, ys = [], []
        for l in lengths:
            t = tally_of(g, config, l)
            if t.total:
                xs.append(l)
                ys.append(t.share())
        # Ten colours, then the next ten dashed, and so on: no two lines look alike.
        style = ["-", "--", ":", "-."][(i // 10) % 4]
        if xs:
            ax.plot(xs, ys, marker="os^Dv"[(i // 10) % 5], linestyle=style, label=config)
    ax.set_xscale("log", base=2)
    ax.set_xticks(lengths, [length_label(l) for l in lengths])
    ax.minorticks_off()
    ax.set_ylim(-0.03, 1.03)
    ax.set_xlabel("document length (tokens, K = 1024)")
    ax.set_ylabel("share found")
    ax.set_title(f"{title(task, hay)}: found by length")
    ax.grid(alpha=0.3)
    # Beside the axes, not over them: ablation configs are long and many.
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1), borderaxespad=0)
    fig.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(fig)


def ablation(plt, g, task, hay, configs, path):
    tallies = [tally_of(g, c) for c in configs]
    # The bars keep about 6 inches whatever the labels take (about 0.06 inch a character).
    fig, ax = plt.subplots(figsize=(6 + 0.06 * max(len(c) for c in configs), 0.45 * len(configs) + 1.6))
    ys = range(len(configs))
    shares = [0 if math.isnan(t.share()) else t.share() for t in tallies]
    ax.barh(ys, shares, color="tab:blue")
    for y, t, s in zip(ys, tallies, shares):
        ax.text(s + 0.01, y, f"n={t.total}" + (f" (+{t.errors} err)" if t.errors else ""), va="center", fontsize=8)
    ax.set_yticks(list(ys), configs, fontsize=8)
    ax.invert_yaxis()  # the first config on top, as listed
    ax.set_xlim(0, 1.2)
    lengths = ", ".join(length_label(l) for l in sorted(g["lengths"]))
    ax.set_xlabel(f"share found over all lengths ({lengths})")
    ax.set_title(f"{title(task, hay)}: ablation")
    fig.tight_layout()
    fig.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(fig)


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results", nargs="+", help="JSONL files written by `infinipot nih --out`")
    parser.add_argument("--out-dir", required=True, help="folder for the PNGs (made if missing)")
    parser.add_argument("--ablation", help="comma list of configs for the bar chart (default: every config)")
    args = parser.parse_args(argv)
    try:
        ablation_configs = None
        if args.ablation is not None:
            ablation_configs = [c.strip() for c in args.ablation.split(",")]
            if any(not c for c in ablation_configs):
                raise InputError(f"--ablation has an empty entry in '{args.ablation}'")
        groups = summarize(read_records(args.results))
        if not groups:
            raise InputError("no record in " + ", ".join(args.results) + " names its trial (config, haystack, length, "
                             "depth, trial, seed): nothing to plot")
        if ablation_configs:
            known = {c for g in groups.values() for c in g["configs"]}
            missing = [c for c in ablation_configs if c not in known]
            if missing:
                raise InputError("--ablation names " + ", ".join(missing) + ", in none of the files; known: " +
                                 ", ".join(sorted(known)))
        if os.path.exists(args.out_dir) and not os.path.isdir(args.out_dir):
            raise InputError(f"--out-dir '{args.out_dir}' is a file, not a folder")
    except InputError as e:
        print(f"plot_results.py: error: {e}", file=sys.stderr)
        return 2

    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("plot_results.py: error: needs matplotlib (Debian: apt install python3-matplotlib; scripts/deps.sh "
              "installs it)", file=sys.stderr)
        return 1
    os.makedirs(args.out_dir, exist_ok=True)

    jobs = []  # (name key, draw)
    for (task, hay), g in groups.items():
        for config in g["configs"]:
            jobs.append((("heatmap", task, hay, config),
                         lambda p, g=g, t=task, h=hay, c=config: heatmap(plt, g, t, h, c, p)))
        jobs.append((("length", task, hay), lambda p, g=g, t=task, h=hay: by_length(plt, g, t, h, p)))
        configs = [c for c in (ablation_configs or g["configs"]) if c in g["configs"]]
        if configs:  # a group with none of the --ablation configs has no bar chart
            jobs.append((("ablation", task, hay), lambda p, g=g, t=task, h=hay, c=configs: ablation(plt, g, t, h, c, p)))
    names = file_names([k for k, _ in jobs], lambda k: "--".join(slug(part) for part in k) + ".png")
    for key, draw in jobs:
        path = os.path.join(args.out_dir, names[key])
        draw(path)
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
