"""Skill evolution: from scored runs with grader feedback to reviewed, leak-checked, versioned skills.

    report = evolve_skills([Path("runs/score.json")], Path("skills"), backend,
                           answer_keys=Path("keys"), model_uri="http://127.0.0.1:8000/v1#qwen")
    report.accepted      # [{"skill": "falsify-units", "version": 1, "path": "skills/falsify-units/versions/v1", ...}]
    report.rejected      # [{"skill": ..., "reason": "it contains values ...: '42' (answer key ..., written '42.0')"}]

Steps: read the runs' failures (:mod:`.failures`; a run without grader feedback is refused),
gather the forbidden values (the runs' grader output, the tasks' archives, ``answer_keys``), ask
one session (:mod:`.session`), review every proposal (:mod:`.proposals`: valid skill, names the
failures it addresses, no leak) and store the accepted ones (:mod:`.store`). A report of the
whole step is written to ``OUT/reports/evolve-<UTC time>.json``.
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from veriscale.errors import UserError, setting
from veriscale.harness.evolve.failures import Failure, ScoredRuns, read_scored_runs
from veriscale.harness.evolve.leak_check import collect_answer_keys
from veriscale.harness.evolve.proposals import Review, parse_proposals, review_proposal
from veriscale.harness.evolve.session import ask, build_prompt
from veriscale.harness.evolve.store import accept, current_skill
from veriscale.harness.jsonfiles import write_json
from veriscale.harness.skills.library import all_skills

REPORTS_DIR = "reports"


@dataclass
class EvolveReport:
    """What one evolve step did: the failures read, each proposal's verdict, and where things went."""

    runs: list[str]
    failures: list[dict[str, Any]]
    accepted: list[dict[str, Any]] = field(default_factory=list)
    rejected: list[dict[str, Any]] = field(default_factory=list)
    reviews: list[dict[str, Any]] = field(default_factory=list)
    injection: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    forbidden_values: int = 0
    answer_key_files: int = 0
    out: str = ""
    file: str | None = None
    evaluation: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"runs": self.runs, "out": self.out, "failures": self.failures, "accepted": self.accepted,
                "rejected": self.rejected, "reviews": self.reviews, "injection": self.injection,
                "forbidden_values": self.forbidden_values, "answer_key_files": self.answer_key_files,
                "notes": self.notes, "evaluation": self.evaluation, "file": self.file}


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def gather(runs: Sequence[Path], *, answer_keys: Path | None = None, archive_dir: Path | None = None) -> tuple[ScoredRuns, int]:
    """The runs' failures and every forbidden value (runs, archives, answer keys); the key files read."""
    scored = read_scored_runs(runs, archive_dir=archive_dir)
    files = 0
    if answer_keys is not None:
        if not Path(answer_keys).is_dir():
            raise UserError(f"answer-key folder '{answer_keys}' does not exist: give {setting('answer_keys')} a folder")
        files = collect_answer_keys(scored.values, Path(answer_keys))
    for failure in scored.failures:  # what the agent was told is not a secret
        text = _task_text(failure.task_dir)
        if text:
            scored.values.add_public(text)
    return scored, files


def _task_text(task_dir: Path | None) -> str:
    from veriscale.harness.workspace.source_layout import TASK_FILE_CANDIDATES

    for name in TASK_FILE_CANDIDATES if task_dir is not None else ():
        path = Path(task_dir) / name
        if path.is_file() and not path.is_symlink() and path.stat().st_size <= 1 << 20:
            return path.read_text(encoding="utf-8", errors="replace")
    return ""


def propose(failures: Sequence[Failure], scored: ScoredRuns, out: Path, backend: Any, *,
            skills_dirs: list[Path] | None = None, mitigation: str = "none", detect_injections: bool = True,
            store: Any = None) -> tuple[list[Review], dict[str, list[dict[str, Any]]]]:
    """One session over ``failures``; every proposal reviewed against the skills current in ``out``."""
    dirs = list(skills_dirs or [])
    if Path(out).is_dir():
        dirs.append(Path(out))
    prompt = build_prompt(failures, list(all_skills(dirs).values()), mitigation=mitigation,
                          detect_injections=detect_injections)
    proposals = parse_proposals(ask(backend, prompt, store=store))
    ids = {f.id for f in failures}
    reviews = [review_proposal(p, current_skill(out, p.skill, skills_dirs), failure_ids=ids, values=scored.values)
               for p in proposals]
    return reviews, prompt.injection


def store_reviews(reviews: Sequence[Review], failures: Sequence[Failure], out: Path, *, runs: list[str],
                  model: str, injection: dict[str, list[dict[str, Any]]]) -> tuple[list[dict], list[dict]]:
    """Store the accepted reviews as new versions; the accepted and rejected entries of the report."""
    by_id = {f.id: f for f in failures}
    accepted, rejected = [], []
    for review in reviews:
        p = review.proposal
        if not review.accepted:
            rejected.append({"skill": p.skill, "addresses": list(p.addresses), "reason": review.reason(),
                             "leaks": [leak.sentence() for leak in review.leaks]})
            continue
        addressed = [by_id[i] for i in p.addresses]
        origin = {"runs": runs, "model": model, "created": _now(),
                  "failures": [{"id": f.id, "task": f.task, "run": f.run, "score": f.score} for f in addressed],
                  "injection": {f.id: injection[f.id] for f in addressed if f.id in injection}}
        version = accept(out, review, origin)
        accepted.append({"skill": p.skill, "version": version, "previous": review.previous,
                         "addresses": list(p.addresses), "path": str(Path(out) / p.skill / "versions" / f"v{version}"),
                         "script": p.script_name})
    return accepted, rejected


def evolve_skills(runs: Sequence[Path], out: Path, backend: Any, *, answer_keys: Path | None = None,
                  archive_dir: Path | None = None, skills_dirs: list[Path] | None = None, model_uri: str = "",
                  mitigation: str = "none", detect_injections: bool = True, store: Any = None,
                  gathered: tuple[ScoredRuns, int] | None = None) -> EvolveReport:
    """Read the runs, ask one session, review and store its proposals; write and return the report.

    ``gathered``: what :func:`gather` already returned for these runs (read once)."""
    scored, key_files = gathered or gather(runs, answer_keys=answer_keys, archive_dir=archive_dir)
    reviews, injection = propose(scored.failures, scored, out, backend, skills_dirs=skills_dirs,
                                 mitigation=mitigation, detect_injections=detect_injections, store=store)
    run_names = [str(r) for r in scored.runs]
    accepted, rejected = store_reviews(reviews, scored.failures, out, runs=run_names, model=model_uri,
                                       injection=injection)
    report = EvolveReport(
        runs=run_names, out=str(out), injection=injection, notes=list(scored.notes),
        failures=[{"id": f.id, "task": f.task, "run": f.run, "score": f.score} for f in scored.failures],
        accepted=accepted, rejected=rejected, reviews=[r.to_dict() for r in reviews],
        forbidden_values=len(scored.values), answer_key_files=key_files)
    if injection:
        report.notes.append("injection-shaped text in the rollouts of " + ", ".join(sorted(injection))
                            + ": read as data (fenced), and named in each skill's origin.json")
    return report


def write_report(report: EvolveReport, out: Path) -> Path:
    """Write the report to ``OUT/reports/evolve-<UTC time>.json`` and return its path."""
    stamp = _now().replace(":", "").replace("-", "")
    path = Path(out) / REPORTS_DIR / f"evolve-{stamp}.json"
    n = 1
    while path.exists():
        n += 1
        path = Path(out) / REPORTS_DIR / f"evolve-{stamp}-{n}.json"
    report.file = str(path)
    write_json(path, report.to_dict(), default=str)
    return path
