"""``veriscale models check MODEL``: can this model be a fine-grained verifier?"""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.table import Table

from veriscale.cli import options as o
from veriscale.cli.common import console, emit_json, user_errors
from veriscale.cli.flags import cli_text
from veriscale.errors import ModelCallError, UserError, setting
from veriscale.engine.sync_facade import CallExecutor, PlannedCall
from veriscale.engine.run_scope import recorded_run
from veriscale.models.base import ModelBackend
from veriscale.models.vision import VISION_SERVERS, no_vision
from veriscale.models.vision_probe import EMBEDDED_WHO, VisionReport, probe_vision
from veriscale.verify.prompts import probe_request
from veriscale.verify.scale import parse_scale
from veriscale.shown_text import for_terminal

models_app = typer.Typer(help="Check model backends.", no_args_is_help=True)


@models_app.command("check")
def check(model: Annotated[str, typer.Argument(help="Model URI, e.g. embedded or http://127.0.0.1:8000/v1#m")],
          scale: o.ScaleOpt = "letters", json_out: o.JsonOpt = False, store: o.StoreOpt = None,
          vision: Annotated[bool, typer.Option(
              "--vision", help="Exit non-zero unless the endpoint shows it sees images (the colour probe).")] = False,
          ) -> None:
    """Report logprob support, label tokenization, context size and whether images are seen.

    Example: veriscale models check http://127.0.0.1:8000/v1#smollm2 --scale digits
    """
    with user_errors():
        backend = o.open_model(o.command_settings(model, store))
        sc = parse_scale(scale)
        report = {"model": backend.uri, "fingerprint": backend.fingerprint(),
                  "context_size": backend.context_size(), "scale": sc.name}
        plan = backend.read_plan()
        report["read"] = plan.to_dict()
        bad = backend.single_token_labels(sc.labels)
        report["labels_single_token"] = not bad
        report["labels_not_single_token"] = bad
        probe = probe_request(sc)
        st = o.open_store(store)
        with recorded_run(st, "models check", backend.uri, {"scale": sc.name}) as run:
            # the probe goes through the gateway like every call (asked afresh: a check must reach the model)
            gateway = CallExecutor(backend, st, prompt_version="models-check", refresh=True)
            try:
                (outcome,) = gateway.run([PlannedCall(probe)])
                if outcome.error:
                    raise ModelCallError(outcome.error)
                resp = outcome.response
                report.update(logprobs=True, label_mass=resp.label_mass, unseen_mass=resp.unseen_mass,
                              top_tokens=resp.top_tokens)
            except UserError as exc:
                report.update(logprobs=False, logprob_error=exc.template)
            except ModelCallError as exc:
                report.update(logprobs=None, logprob_error=exc.template)
            # whether images are seen: by behaviour (a text-only server may take image parts silently)
            if report.get("logprobs") or backend.is_embedded:
                seen = probe_vision(gateway)
            else:
                seen = VisionReport(sees_images=None, error="not probed: the vision probe reads label probabilities, "
                                                            "which this endpoint did not give")
            report["vision"] = seen.to_dict()
            run.finish("ok" if report.get("logprobs") else "failed", report)
        if json_out:
            emit_json(report, "models-check")
        else:
            _print_check(backend, report, plan, sc, bad, seen)
        if vision and not seen.sees_images:
            raise _not_seeing(backend, seen)


def _template(text: str) -> str:
    """``text`` with its setting references kept (a worded note's template), for ``cli_text``."""
    return str(getattr(text, "template", text))


def _images_row(seen: VisionReport) -> str:
    if seen.sees_images:
        return ("seen" + (f" ({seen.image_tokens} tokens each)" if seen.image_tokens is not None
                          else " (tokens per image unknown)"))
    if seen.sees_images is None:
        return f"unknown: {_template(seen.why_not())}"
    return f"not seen: {_template(seen.why_not())}"


def _not_seeing(backend: ModelBackend, seen: VisionReport) -> UserError:
    """The one sentence of ``--vision`` for an endpoint that did not show it sees images."""
    if backend.is_embedded:
        return no_vision(EMBEDDED_WHO)
    what = "could not be asked whether it sees images" if seen.sees_images is None else "does not see images"
    why = _template(seen.why_not()).rstrip(".")
    return UserError(f"{backend.display_name} {what} ({why}): set {setting('model')} to {VISION_SERVERS}")


def _print_check(backend: ModelBackend, report: dict[str, Any], plan: Any, sc: Any, bad: list[str],
                 seen: VisionReport) -> None:
    table = Table(title=for_terminal(f"models check · {backend.display_name}"), show_header=False)
    table.add_row("fingerprint", for_terminal(report["fingerprint"]))  # server text: shown as text
    table.add_row("context size", str(report["context_size"] or "unknown (server does not say)"))
    table.add_row("read", plan.describe())
    table.add_row("readings marked", plan.strategy)
    table.add_row("joint replies held by", plan.joint or "nothing: joint scoring reads each criterion alone")
    table.add_row("score slot", "prefilled" if plan.prefilled else
                  "not prefilled: readings are the model's first token (add ?template=chatml for the prefilled slot)")
    for note in plan.notes:
        table.add_row("probe", for_terminal(note))
    table.add_row("logprobs", "yes" if report["logprobs"] else
                  for_terminal(f"no: {cli_text(report.get('logprob_error') or '')}"))
    if report["logprobs"]:
        table.add_row("label mass on probe", f"{report['label_mass']:.3f} (unseen {report['unseen_mass']:.3f})")
    table.add_row(f"labels of {sc.name}", "all single tokens" if not bad else
                  for_terminal(f"NOT single tokens: {', '.join(bad)} — use --scale letters or yesno"))
    table.add_row("images", for_terminal(cli_text(_images_row(seen))))
    if not seen.sees_images and not backend.is_embedded:
        table.add_row("for images", for_terminal(cli_text(f"set {setting('model')} to {VISION_SERVERS}")))
    console.print(table)


@models_app.command("calibrate")
def calibrate(
    model: Annotated[str, typer.Argument(help="Model URI.")],
    pairs: Annotated[str, typer.Option("--pairs", help="JSONL of instruction/output_1/output_2/label (1|2).")],
    limit: Annotated[int, typer.Option("--limit", help="Use the first N pairs.")] = 30,
    method: Annotated[str, typer.Option("--method", help="spread (P spans (0,1)) or mle (likelihood).")] = "spread",
    scale: o.ScaleOpt = "letters", criteria: o.CriteriaOpt = "general", discrete: o.DiscreteOpt = False,
    store: o.StoreOpt = None, max_calls: o.MaxCallsOpt = None, json_out: o.JsonOpt = False,
) -> None:
    """Fit tau in P(a beats b) = sigmoid((R_a - R_b)/tau) on labelled pairs and store it.

    Example: veriscale models calibrate embedded --pairs pairs.jsonl --limit 30
    """
    import numpy as np

    from veriscale.verify import calibration as cal
    from veriscale.verify.reward import Verifier

    with user_errors():
        if method not in ("spread", "mle"):
            raise UserError(f"unknown calibration method '{method}': use spread or mle")
        rows = cal.load_labelled_pairs(pairs, limit)
        st = o.open_store(store)
        v = Verifier(o.open_model(o.command_settings(model, store)), store=st, scale=scale, criteria=criteria, discrete=discrete,
                     max_calls=max_calls, tau=1.0)
        diffs, wins = [], []
        total = len(v.plan_compare(rows[0]["task"], rows[0]["a"], rows[0]["b"])[0]) * len(rows)
        with o.call_progress(total, "calibrating", not json_out, what="models calibrate") as advance:
            for r in rows:
                res = v.compare(r["task"], r["a"], r["b"], progress=advance)
                if res.failed:
                    raise UserError("model calls failed during calibration: " + "; ".join(res.errors[:2]) + " (rerun to retry them)")
                diffs.append(res.reward_a - res.reward_b)
                wins.append(r["a_wins"])
        taus = {"spread": cal.fit_tau_spread(diffs), "mle": cal.fit_tau_mle(diffs, wins)}
        tau = taus[method]
        st.set_meta(cal.tau_key(v.executor.calibration_key(), v.scale.name, discrete, cal.criteria_tag(v.criteria)),
                    repr(tau))
        d = np.asarray(diffs)
        p = 1 / (1 + np.exp(-d / tau))
        report = {"model": v.model.uri, "pairs": len(rows), "method": method, "tau": tau, "criteria": v.criteria.name,
                  "tau_spread": taus["spread"], "tau_mle": taus["mle"],
                  "accuracy": float(np.mean([(x > 0) == w for x, w in zip(diffs, wins) if x != 0])) if np.any(d != 0) else None,
                  "tie_rate": float(np.mean(d == 0)),
                  "log_loss": {k: cal.log_loss(diffs, wins, t) for k, t in taus.items()},
                  "p_5th_95th_percentile": [float(np.quantile(p, 0.05)), float(np.quantile(p, 0.95))],
                  "usage": v.usage.to_dict()}
        if json_out:
            emit_json(report, "models-calibrate")
            return
        table = Table(title=f"calibration · {v.model.display_name} · {v.scale.name}", show_header=False)
        for key in ("pairs", "accuracy", "tie_rate", "tau_spread", "tau_mle", "tau"):
            val = report[key]
            table.add_row(key, f"{val:.4g}" if isinstance(val, float) else str(val))
        table.add_row("P range (5%–95%)", "{:.3f} – {:.3f}".format(*report["p_5th_95th_percentile"]))
        console.print(table)
        console.print(f"stored tau={tau:.4g} ({method}) for this model in {st.path}")


def register(app: typer.Typer) -> None:
    app.add_typer(models_app, name="models")
