"""The temperature tau in P(a beats b) = sigmoid((R_a - R_b) / tau), per model.

Reward gaps differ a lot between models (a 135M model's rewards huddle together; a strong
model's spread out), so one fixed tau would squeeze P into a narrow band around 0.5 for some
models. ``veriscale models calibrate`` measures reward gaps on labelled dev pairs and stores tau
in the store under the model's fingerprint, scale and mode:

* ``spread`` (default): tau such that the 90th percentile of |R_a - R_b| maps to P = 0.9, so
  P spans (0, 1) on that model's typical gaps.
* ``mle``: tau maximising the likelihood of the labels (calibrated probabilities; for a judge
  with little signal this is large and P stays near 0.5 — which is then the honest answer).

Without a stored fit, ``DEFAULT_TAU`` is used and the result says which tau it used::

    tau = fit_tau_spread([0.02, -0.01, 0.05])
    tau_for(store, fingerprint, "letters:20", discrete=False)
"""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np


DEFAULT_TAU = 0.1  # a reward gap of 0.1 (two letter grades on G=20) gives P = 0.73
SPREAD_QUANTILE = 0.9
SPREAD_TARGET_P = 0.9


def criteria_tag(criteria: Any) -> str:
    """What a τ depends on besides the model, scale and read: the criteria it averages over (their
    number C sets how far rewards spread). ``""`` for the built-in ``general`` pack whole (the key
    calibrations had before there were packs, so they still apply to it); else the set's name, C and
    a digest of its criteria, so a pack, a subset of one, an edited file or generated criteria each
    need their own calibration::

        criteria_tag(load_criteria("general"))               # ''
        criteria_tag(load_criteria("swe"))                   # 'swe/3/1f0c…'
    """
    import hashlib

    from veriscale.verify.criteria import load_criteria

    items = tuple((c.name, c.description) for c in criteria.items)
    if criteria.name == "general" and items == tuple((c.name, c.description) for c in load_criteria("general").items):
        return ""
    digest = hashlib.sha256(json.dumps(items, ensure_ascii=False).encode()).hexdigest()[:12]
    return f"{criteria.name}/{len(items)}/{digest}"


def tau_key(fingerprint: str, scale: str, discrete: bool, criteria: str = "") -> str:
    """The store/shipped-table key of a τ: model, judge prompt version, scale, mode and criteria
    (:func:`criteria_tag`; a τ measured under one prompt version or criteria set is not reused under
    another)."""
    from veriscale.verify.prompts import PROMPT_VERSION

    key = f"tau:{fingerprint}:{PROMPT_VERSION}:{scale}:{'discrete' if discrete else 'continuous'}"
    return f"{key}:criteria={criteria}" if criteria else key


def shipped_taus() -> dict[str, float]:
    """Taus measured by the project on the dev pairs (the embedded model), keyed like the store."""
    import json
    from importlib import resources

    try:
        return json.loads(resources.files("veriscale.verify").joinpath("calibrated_tau.json").read_text())
    except (FileNotFoundError, ValueError):
        return {}


def tau_for(store, fingerprint: str, scale: str, discrete: bool, criteria: str = "") -> float:
    """Tau from the store (your calibration), else the shipped table, else DEFAULT_TAU."""
    return tau_with_source(store, fingerprint, scale, discrete, criteria)[0]


def tau_with_source(store, fingerprint: str, scale: str, discrete: bool, criteria: str = "") -> tuple[float, str]:
    """``(tau, source)``: source is ``calibrated`` (your store), ``shipped`` (the project's table) or
    ``default`` (DEFAULT_TAU: no calibration for this model, scale, read and criteria)."""
    key = tau_key(fingerprint, scale, discrete, criteria)
    if store is not None:
        value = store.get_meta(key)
        if value is not None:
            return float(value), "calibrated"
    shipped = shipped_taus().get(key)
    return (float(shipped), "shipped") if shipped is not None else (DEFAULT_TAU, "default")


def default_tau_note(tau: float, criteria: Any = None) -> str:
    """What a pairwise verdict says when its τ is the uncalibrated default (``criteria``: the set it
    used, named when it is not the general pack)."""
    which, flag = "this scale and read", ""
    if criteria is not None and criteria_tag(criteria):
        which = f"this scale, read and criteria set ('{criteria.name}', {len(criteria.items)} criteria)"
        flag = f" --criteria {criteria.name}" if not criteria.name.endswith(".md") else " --criteria FILE"
    return (f"P(a beats b) uses the default tau {tau:g}: this model has no calibration for {which}, so P "
            f"is only ordinal (uncalibrated); calibrate it with 'veriscale models calibrate MODEL --pairs FILE{flag}' "
            "(a server of a GGUF file shares that file's tau when its URI names it with ?weights=FILE.gguf and its "
            "reads are exact).")


def fit_tau_spread(diffs: list[float]) -> float:
    """tau that maps the 90th percentile of |diff| to P = 0.9."""
    d = np.abs(np.asarray(diffs, dtype=float))
    q = float(np.quantile(d, SPREAD_QUANTILE)) if len(d) else 0.0
    if q <= 0:
        return DEFAULT_TAU
    return q / math.log(SPREAD_TARGET_P / (1 - SPREAD_TARGET_P))


def fit_tau_mle(diffs: list[float], a_wins: list[bool], lo: float = 1e-3, hi: float = 10.0) -> float:
    """Maximum-likelihood tau for P(a wins) = sigmoid(diff / tau) (bounded search)."""
    d = np.asarray(diffs, dtype=float)
    y = np.asarray(a_wins, dtype=float)
    if len(d) == 0 or not np.any(d != 0):
        return DEFAULT_TAU

    def nll(log_tau: float) -> float:
        z = d / math.exp(log_tau)
        return float(np.sum(np.logaddexp(0, -z) * y + np.logaddexp(0, z) * (1 - y)))

    from scipy.optimize import minimize_scalar  # scipy only where a tau is fitted

    res = minimize_scalar(nll, bounds=(math.log(lo), math.log(hi)), method="bounded")
    return float(math.exp(res.x))


def log_loss(diffs: list[float], a_wins: list[bool], tau: float) -> float:
    d = np.asarray(diffs, dtype=float) / tau
    y = np.asarray(a_wins, dtype=float)
    return float(np.mean(np.logaddexp(0, -d) * y + np.logaddexp(0, d) * (1 - y)))


def load_labelled_pairs(path: str, limit: int | None = None) -> list[dict]:
    """Pairs as JSONL: ``instruction``, ``output_1``, ``output_2``, ``label`` (1 or 2)."""
    import json
    from pathlib import Path

    from veriscale.data.reader import parse_json, read_text
    from veriscale.errors import UserError

    p = Path(path)
    if not p.is_file():
        raise UserError(f"pairs file '{path}' does not exist: pass a JSONL file of instruction/output_1/output_2/label rows")
    rows = []
    for n, line in enumerate(read_text(p, "pairs file").splitlines(), 1):
        if not line.strip():
            continue
        try:
            r = parse_json(line, f"line {n} of pairs file '{path}'")
            rows.append({"task": r["instruction"], "a": r["output_1"], "b": r["output_2"], "a_wins": int(r["label"]) == 1})
        except (json.JSONDecodeError, KeyError, TypeError, ValueError):
            raise UserError(f"line {n} of '{path}' is not a labelled pair: each line needs instruction, output_1, output_2 and label (1 or 2)") from None
        if limit and len(rows) >= limit:
            break
    if not rows:
        raise UserError(f"pairs file '{path}' has no pairs: add JSONL rows of instruction/output_1/output_2/label")
    return rows
