#!/usr/bin/env python3
"""Draws the waterfall update curve of `pir bench --modes checklist-updates --csv FILE`.

Usage: plot_checklist_updates.py FILE.csv OUT.png [--rehint SECONDS]

One point per step: the offline server's time for one client's hints of the buckets the step
created (log scale), the running mean, and re-hinting from scratch (--rehint, the figure the
benchmark prints) as a reference line, as in Checklist's Figure 4 (Kogan and Corrigan-Gibbs 2021).
Needs matplotlib (benches/requirements.txt).
"""

import argparse
import csv

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("csv")
    parser.add_argument("png")
    parser.add_argument("--rehint", type=float, help="re-hinting time, seconds")
    args = parser.parse_args()
    steps, seconds = [], []
    with open(args.csv) as f:
        for row in csv.DictReader(f):
            steps.append(int(row["step"]))
            seconds.append(max(float(row["seconds"]), 1e-6))
    running, total = [], 0.0
    for k, s in enumerate(seconds, 1):
        total += s
        running.append(total / k)
    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=120)
    ax.scatter(steps, seconds, s=8, label="waterfall update (one client's new hints)")
    ax.plot(steps, running, linestyle="--", label="running average")
    if args.rehint:
        ax.axhline(args.rehint, color="red", label="re-hinting from scratch")
    ax.set_yscale("log")
    ax.set_xlabel("update step (1 % of the records changed per step)")
    ax.set_ylabel("server time (s)")
    ax.set_title("Checklist waterfall updates: server cost per step")
    ax.legend()
    fig.tight_layout()
    fig.savefig(args.png)


if __name__ == "__main__":
    main()
