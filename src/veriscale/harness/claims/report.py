"""A claim map written out: ``claims.json``, ``agenda.json`` (both checked against their schemas)
and ``claims.md``, a short Markdown summary (counts per class: consensus, disputed, omitted; the
top agenda items)::

    paths = write_claim_map(claim_map, Path("tasks/finance.claims"))
    text = render_markdown(claim_map, build_agenda(claim_map))
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from veriscale.harness.claims.claim_map import DEFAULT_ALPHA, ClaimMap, build_agenda, validate
from veriscale.harness.jsonfiles import write_json
from veriscale.shown_text import for_code_span as _code
from veriscale.shown_text import for_markdown as _cell

TOP_N = 10


def render_markdown(claim_map: ClaimMap, agenda: dict[str, Any], *, top: int = TOP_N) -> str:
    """Counts per class, the top disputed claims by agenda rank, and the omissions."""
    counts = claim_map.counts()
    total = sum(counts.values())
    lines = [
        f"# Claim map: {_cell(claim_map.task)}",
        "",
        f"{len(claim_map.rollouts)} rollouts ({_cell(', '.join(claim_map.rollouts))}), {total} claim keys: "
        f"**{counts['consensus']} consensus**, **{counts['disputed']} disputed**, "
        f"**{counts['omitted']} omitted**.",
        "",
        "- Consensus is not proof: every rollout can share one error (stale source, wrong unit). "
        "The consensus challenger should try to falsify these.",
        "- Disagreement is information: a disputed claim often has a correct candidate, and the "
        "majority value is not reliably it. The resolver checks them in the agenda's order.",
        "",
    ]
    items = agenda["items"][:top]
    if items:
        lines += [
            f"## Top disputed claims (of {counts['disputed']}), most informative check first",
            "",
            "| # | claim | candidates (support: rollouts) | gain (bits) | related | check |",
            "|---|---|---|---|---|---|",
        ]
        for item in items:
            candidates = "; ".join(
                f"{c['display']} ({c['support']}: {', '.join(c['rollouts'])})" for c in item["candidates"]
            )
            if item["missing_from"]:
                candidates += f"; missing: {', '.join(item['missing_from'])}"
            lines.append(
                f"| {item['rank']} | `{_code(item['key'])}` | {_cell(candidates)} | "
                f"{item['gain_bits']:.3f} | {item['related_claims']} | {_cell(item['check'])} |"
            )
        lines.append("")
    omitted = claim_map.with_status("omitted")
    if omitted:
        lines += [f"## Omitted claims ({len(omitted)}; first {min(top, len(omitted))})", ""]
        for record in omitted[:top]:
            have = record.candidates[0].rollouts
            lines.append(
                f"- `{_code(record.key)}` = {_cell(record.candidates[0].display)}: "
                f"in {_cell(', '.join(have))}; missing from {_cell(', '.join(record.missing_from))}"
            )
        lines.append("")
    if claim_map.warnings:
        lines += ["## Warnings", ""] + [f"- {_cell(w)}" for w in claim_map.warnings] + [""]
    return "\n".join(lines)


def write_claim_map(claim_map: ClaimMap, out_dir: Path, *, alpha: float = DEFAULT_ALPHA) -> dict[str, Path]:
    """Write ``claims.json``, ``agenda.json`` and ``claims.md`` into ``out_dir``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    claims_doc = claim_map.to_dict()
    agenda_doc = build_agenda(claim_map, alpha=alpha)
    validate(claims_doc, "claims")
    validate(agenda_doc, "agenda")
    paths = {"claims": out_dir / "claims.json", "agenda": out_dir / "agenda.json", "report": out_dir / "claims.md"}
    write_json(paths["claims"], claims_doc)
    write_json(paths["agenda"], agenda_doc)
    paths["report"].write_text(render_markdown(claim_map, agenda_doc), encoding="utf-8")
    return paths
