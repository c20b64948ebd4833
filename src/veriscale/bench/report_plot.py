"""PNG plot of a bench report (matplotlib, Agg backend; ``pip install 'veriscale[bench]'``).

    plot_report(report, "bench.png")

Pairs: accuracy and tie rate per configuration, with SNR beside. Pools: pass@1, random pick,
selected and oracle per configuration, with model calls per task beside.
"""

from __future__ import annotations

from pathlib import Path

from veriscale.bench.bench_runner import BenchReport
from veriscale.errors import UserError
from veriscale.plotting import png_path, pyplot, save_figure


def _bars(ax, labels: list[str], series: dict[str, list[float | None]], ylabel: str) -> None:
    width = 0.8 / max(len(series), 1)
    for s, (name, values) in enumerate(series.items()):
        xs = [i + (s - (len(series) - 1) / 2) * width for i in range(len(labels))]
        ax.bar(xs, [0.0 if v is None else v for v in values], width, label=name)
    ax.set_xticks(range(len(labels)))
    ax.set_xticklabels(labels, rotation=30, ha="right", fontsize=8)
    ax.set_ylabel(ylabel)
    ax.legend(fontsize=8)


def plot_report(report: BenchReport, path: str | Path) -> Path:
    """Write the report's plot as a PNG at ``path`` and return the path."""
    if not report.rows:
        raise UserError("the bench report has no rows to plot: run at least one configuration")
    out = png_path(path)
    plt = pyplot()
    labels = [r.label for r in report.rows]
    fig, (left, right) = plt.subplots(1, 2, figsize=(max(8, 1.6 * len(labels) + 4), 4.5))
    m = [r.metrics for r in report.rows]
    if report.kind == "pairs":
        _bars(left, labels, {"accuracy": [x["accuracy"] for x in m], "tie rate": [x["tie_rate"] for x in m]}, "rate")
        left.set_ylim(0, 1)
        left.axhline(0.5, color="grey", linewidth=0.8, linestyle="--")
        _bars(right, labels, {"SNR": [x["snr"] for x in m]}, "mean margin / std")
        right.axhline(0, color="grey", linewidth=0.8)
    else:
        _bars(left, labels, {"pass@1": [x["pass_at_1"] for x in m], "random": [x["random_pick"] for x in m],
                             "selected": [x["selected"] for x in m], "oracle": [x["oracle"] for x in m]}, "pass rate")
        left.set_ylim(0, 1)
        per_task = [x["model_calls"] / x["n_tasks"] if x["n_tasks"] else 0 for x in m]
        _bars(right, labels, {"model calls per task": per_task}, "calls")
    fig.suptitle(f"veriscale bench · {report.kind} · {Path(report.data).name} · {report.model} · n={len(report.items)}",
                 fontsize=10)
    return save_figure(plt, fig, out)
