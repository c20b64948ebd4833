"""A progress curve on the terminal: its sparkline, a table of checkpoints, VOC, events and cost
(``veriscale track`` and ``track --follow`` print it)::

    render_curve(curve)
"""

from __future__ import annotations

from rich.table import Table

from veriscale.cli.common import console
from veriscale.progress.curve import ProgressCurve
from veriscale.shown_text import assembled, for_terminal


def render_curve(curve: ProgressCurve) -> None:
    """The curve as a sparkline, a table of checkpoints, VOC, events and cost."""
    name = curve.trajectory_id or "trajectory"
    outcome = "" if curve.outcome is None else f" · outcome {curve.outcome}"
    console.print(assembled(for_terminal(name, "bold"), f"{outcome} · {len(curve.points)} checkpoints of {curve.n_steps} steps"),
                  highlight=False)  # the trajectory's id and outcome come from its file: shown as text
    console.print(f"  progress {curve.sparkline()}  {_pct(curve.points[0].value)} → {_pct(curve.points[-1].value)}",
                  highlight=False)
    table = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    for col in ("step", "progress", "label mass", "tokens processed"):
        table.add_column(col, justify="right")
    for p in curve.points:
        table.add_row(str(p.step), "failed" if p.value is None else _pct(p.value), f"{p.label_mass:.2f}",
                      str(p.prompt_tokens) + (" (re-rendered)" if p.rerendered else ""))
    console.print(table)
    voc = "n/a" if curve.voc is None else f"{curve.voc:.3f}"
    console.print(f"  VOC (Spearman of step and progress): [bold]{voc}[/]", highlight=False)
    for event in curve.events:
        console.print(assembled(("  ", ""), (event.kind, "yellow"), (" ", ""), event.message), highlight=False)
    console.print(f"  {curve.prompt_tokens} prompt tokens processed of {curve.prompt_tokens_total} sent "
                  f"({curve.rerenders} re-render(s))", style="dim", highlight=False)


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.0f}%"
