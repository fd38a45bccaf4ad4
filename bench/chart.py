"""Draws the benchmark chart: throughput and p99 latency per contender.

    python3 bench/chart.py RESULTS.csv OUT.png "title"

RESULTS.csv comes from bench/cmd/report (-csv): name,records_per_sec,p99_ms.

    python3 bench/chart.py --curve keys|partitions|size CURVE.csv OUT.png "title"

draws a scaling curve (bench/cmd/curves -csv): records/s per contender
against the point, beside what the curve is about (keys: peak RSS and
checkpoint and restore times; partitions: p99 latency; size: MB/s).
"""
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402


def color(n):
    if n.startswith("plain"):
        return "#888888"
    if n.startswith("kafka-txn"):
        return "#d62728"
    if n.startswith("kstreams"):
        return "#ff7f0e"
    if n.startswith("flink"):
        return "#2ca02c"
    return "#1f77b4"


def curve(kind, src, out, title):
    rows = [r for r in csv.DictReader(open(src)) if float(r["records_per_sec"] or 0) > 0]
    points = sorted({int(r["point"]) for r in rows})
    labels = {int(r["point"]): r["label"] for r in rows}
    names = []
    for r in rows:
        if r["contender"] not in names:
            names.append(r["contender"])

    def series(name, col):
        xs, ys = [], []
        for r in rows:
            if r["contender"] == name and r[col] not in ("", None):
                xs.append(int(r["point"]))
                ys.append(float(r[col]))
        return xs, ys

    panels = [("records_per_sec", "throughput (drain)", "records/s")]
    if kind == "keys":
        panels += [("peak_rss_mib", "peak RSS", "MiB"),
                   ("checkpoint_mean_ms", "mean checkpoint; dashed: SIGKILL to first new output", "ms")]
    elif kind == "partitions":
        panels += [("p99_ms", "p99 end-to-end latency", "ms")]
    else:
        panels += [("mb_per_sec", "throughput (input keys and values)", "MB/s")]
    fig, axes = plt.subplots(1, len(panels), figsize=(6.5 * len(panels), 4.8))
    for ax, (col, head, ylabel) in zip(axes, panels):
        for n in names:
            xs, ys = series(n, col)
            if col == "checkpoint_mean_ms":  # only the pipeline has them
                kept = [(x, y) for x, y in zip(xs, ys) if y > 0]
                xs, ys = [x for x, _ in kept], [y for _, y in kept]
            if xs:
                ax.plot(xs, ys, marker="o", color=color(n), label=n)
            if col == "checkpoint_mean_ms":
                rx, ry = series(n, "restore_ms")
                if rx:
                    ax.plot(rx, ry, marker="s", linestyle="--", color=color(n), label=n + " restore")
        ax.set_xscale("log")
        ax.set_xticks(points, [labels[p] for p in points])
        ax.minorticks_off()
        ax.set_xlabel({"keys": "distinct keys", "size": "record size"}.get(kind, kind))
        ax.set_title(head, fontsize=10)
        ax.set_ylabel(ylabel)
        if kind == "size" and col == "records_per_sec":
            ax.set_yscale("log")  # a hundredfold from 100 B to 10 KB
        else:
            ax.set_ylim(bottom=0)
        ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:,.0f}"))
        ax.grid(True, alpha=0.3)
    axes[0].legend(fontsize=7)
    if kind == "keys":
        axes[2].legend(fontsize=7)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def main():
    if sys.argv[1] == "--curve":
        curve(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5] if len(sys.argv) > 5 else "scaling curve")
        return
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
