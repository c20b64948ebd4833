"""``veriscale models check MODEL``: can this model be a fine-grained verifier?"""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from veriscale.cli import options as o
from veriscale.cli.common import console, emit_json, user_errors
from veriscale.errors import ModelCallError, UserError
from veriscale.models.base import Message, ScoreRequest
from veriscale.verify.scale import parse_scale

models_app = typer.Typer(help="Check model backends.", no_args_is_help=True)


@models_app.command("check")
def check(model: Annotated[str, typer.Argument(help="Model URI, e.g. embedded or http://127.0.0.1:8000/v1#m")],
          scale: o.ScaleOpt = "letters", json_out: o.JsonOpt = False) -> None:
    """Report logprob support, label tokenization and context size.

    Example: veriscale models check http://127.0.0.1:8000/v1#smollm2 --scale digits
    """
    with user_errors():
        backend = o.open_model(model)
        sc = parse_scale(scale)
        report = {"model": backend.uri, "fingerprint": backend.fingerprint(),
                  "context_size": backend.context_size(), "scale": sc.name}
        bad = backend.single_token_labels(sc.labels)
        report["labels_single_token"] = not bad
        report["labels_not_single_token"] = bad
        probe = ScoreRequest(messages=(Message("user", "Is 2 + 2 equal to 4? " + sc.instruction()),),
                             prefill="Grade:", labels=sc.labels)
        try:
            resp = backend.score(probe)
            report.update(logprobs=True, label_mass=resp.label_mass, unseen_mass=resp.unseen_mass,
                          top_tokens=resp.top_tokens)
        except UserError as exc:
            report.update(logprobs=False, logprob_error=str(exc))
        except ModelCallError as exc:
            report.update(logprobs=None, logprob_error=str(exc))
        if json_out:
            emit_json(report)
            return
        table = Table(title=f"models check · {backend.display_name}", show_header=False)
        table.add_row("fingerprint", report["fingerprint"])
        table.add_row("context size", str(report["context_size"] or "unknown (server does not say)"))
        table.add_row("logprobs", "yes" if report["logprobs"] else f"no: {report.get('logprob_error')}")
        if report["logprobs"]:
            table.add_row("label mass on probe", f"{report['label_mass']:.3f} (unseen {report['unseen_mass']:.3f})")
        table.add_row(f"labels of {sc.name}", "all single tokens" if not bad else
                      f"NOT single tokens: {', '.join(bad)} — use --scale letters or yesno")
        console.print(table)


def register(app: typer.Typer) -> None:
    app.add_typer(models_app, name="models")
