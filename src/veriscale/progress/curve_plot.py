"""PNG plot of progress curves (matplotlib; ``pip install 'veriscale[bench]'``).

    plot_curves([curve_success, curve_failure], "progress.png")

One line per curve (progress in % over the step index) with its VOC in the legend and a marker
at each event: ▼ regression, ■ stall, ★ likely done.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from veriscale.plotting import png_path, pyplot, save_figure
from veriscale.errors import UserError
from veriscale.progress.curve import ProgressCurve

_MARKERS = {"regression": "v", "stall": "s", "likely_done": "*"}


def _axes(ax) -> None:
    from matplotlib.ticker import MaxNLocator

    ax.set_xlabel("step")
    ax.set_ylabel("progress (%)")
    ax.set_ylim(-2, 102)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.grid(alpha=0.3)


def plot_curves(curves: Sequence[ProgressCurve], path: str | Path, title: str = "") -> Path:
    """Write the curves' plot at ``path`` (a .png) and return the path."""
    out = png_path(path)
    if not any(p.value is not None for c in curves for p in c.points):
        raise UserError("there is no scored checkpoint to plot: every checkpoint's model call failed")
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8, 4.2))
    for curve in curves:
        pts = [(p.step, 100 * p.value) for p in curve.points if p.value is not None]
        voc = "n/a" if curve.voc is None else f"{curve.voc:.2f}"
        name = curve.trajectory_id or "trajectory"
        if curve.outcome is not None:
            name += f" (outcome {curve.outcome})"
        (line,) = ax.plot([s for s, _ in pts], [v for _, v in pts], marker=".", label=f"{name} · VOC {voc}")
        for event in curve.events:
            ax.plot([event.step], [100 * event.value], _MARKERS.get(event.kind, "o"), color=line.get_color(),
                    markersize=9, markeredgecolor="black")
    _axes(ax)
    ax.legend(fontsize=8, loc="lower right")
    models = sorted({c.model for c in curves})
    ax.set_title(title or f"veriscale track · {', '.join(models)} · {curves[0].scale}", fontsize=10)
    return save_figure(plt, fig, out)


def plot_bench_rows(report, path: str | Path) -> Path:
    """A progress bench's curves: one thin line per run, green when it succeeded, red when it failed
    (first-error data: green for correct solutions)."""
    out = png_path(path)
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8, 4.2))
    for row in report.rows:
        good = (row["outcome"] == -1) if report.kind == "first_error" else bool(row["outcome"])
        pts = [(s, 100 * v) for s, v in zip(row["steps"], row["continuous"]) if v is not None]
        ax.plot([s for s, _ in pts], [v for _, v in pts], color="tab:green" if good else "tab:red", alpha=0.5, linewidth=1)
    _axes(ax)
    ax.set_title(f"veriscale bench --progress · {report.kind} · {report.model} · n={report.n_items} "
                 "(green: success / correct, red: failure / wrong)", fontsize=9)
    return save_figure(plt, fig, out)
