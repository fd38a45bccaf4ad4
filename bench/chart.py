"""Draws the benchmark chart: throughput and p99 latency per contender.

    python3 bench/chart.py RESULTS.csv OUT.png "title"

RESULTS.csv comes from bench/cmd/report (-csv): name,records_per_sec,p99_ms.
"""
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    src, out, title = sys.argv[1], sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else "benchmark"
    rows = list(csv.DictReader(open(src)))
    names = [r["name"] for r in rows]
    rate = [float(r["records_per_sec"]) for r in rows]
    p99 = [float(r["p99_ms"]) for r in rows]
    colors = []
    for n in names:
        if n.startswith("plain"):
            colors.append("#888888")
        elif n.startswith("kafka-txn"):
            colors.append("#d62728")
        elif n.startswith("kstreams"):
            colors.append("#ff7f0e")
        elif n.startswith("flink"):
            colors.append("#2ca02c")
        else:
            colors.append("#1f77b4")
    fig, (a, b) = plt.subplots(1, 2, figsize=(14, 0.45 * len(names) + 1.5), sharey=True)
    y = range(len(names))
    a.barh(y, rate, color=colors)
    a.set_yticks(list(y), names)
    a.invert_yaxis()
    a.set_xlabel("records/s (drain, read_committed visible)")
    for i, v in enumerate(rate):
        a.text(v, i, f" {v:,.0f}", va="center", fontsize=7)
    b.barh(y, p99, color=colors)
    b.set_xlabel("p99 end-to-end latency, ms (0 = not measured)")
    for i, v in enumerate(p99):
        b.text(v, i, f" {v:,.0f}", va="center", fontsize=7)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(out, dpi=110)


if __name__ == "__main__":
    main()
