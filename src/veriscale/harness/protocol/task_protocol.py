"""The verification protocol on one task: resolve ‖ challenge → adjudicate → deliver.

- **resolve** and **challenge** run at the same time in isolated sessions (own output folder,
  own transcript; neither can read the other's). The resolver's prompt carries the claim map's
  agenda (disputed claims ranked by information gain); the challenger's carries the consensus
  and omitted claims. Each writes a schema-checked ledger (``ledger.json``).
- **adjudicate** is a fresh session that sees the task, the rollouts and the valid ledgers
  (staged read-only in ``evidence/``) and writes ``finish.json``: a base rollout or ``none``,
  evidence-backed revisions, unresolved items.
- **deliver** continues the adjudication session (same transcript) under the ``artifact``
  contract: the base is copied to ``out/deliverables/``, the session applies the revisions and
  writes ``repair.json``. Under ``pick-only`` delivery is the base copied, with no model call.
- The one programmatic gate (:func:`keep_base_files`): every file of the base stays in the bundle
  (a dropped one is restored from the base), no office file that points outside itself does
  (external links, external relationships other than hyperlinks, formulas into other workbooks,
  DTDs: refused in one sentence each), and every file is reported with its sha256 and whether it
  changed.

A phase whose record is missing or invalid is recorded as failed with the validation problems;
the run goes on with what exists. Where a run keeps its files: :mod:`.layout` (``RunLayout``); what
each phase's state and the outcome document hold: :mod:`.run_report`.

Usage::

    config = ProtocolConfig(model_uri="http://127.0.0.1:8000/v1#m", contract="artifact")
    outcome = run_protocol(Path("tasks/t1"), RunLayout.for_task(Path("tasks/t1"), "run-1"), config, BuiltinExecutor())
    outcome["outcome"], outcome["base"], outcome["phases"]["resolve"]["status"]
"""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from veriscale.errors import UserError, worded
from veriscale.fence import DATA_RULE, fence
from veriscale.harness.sessions.agent import AgentLimits
from veriscale.harness.protocol.gate import copy_base, keep_base_files, publish_delivery
from veriscale.harness.sessions.executors import Executor, SessionSpec
from veriscale.harness.sessions.result import SessionResult
from veriscale.harness.jail.sandbox import JAIL_OFF_MESSAGE, JailLimits
from veriscale.harness.protocol.session_records import (
    BASE_NONE,
    MAX_RECORD_BYTES,
    CONTRACTS,
    RecordContext,
    evidence_ids,
    read_record,
    record_check,
)
from veriscale.harness.jsonfiles import read_json, write_json
from veriscale.harness.protocol.layout import DELIVERABLES_SUBDIR, RunLayout
from veriscale.harness.protocol.phases import PHASES, RECORD_KIND, protocol_phase  # noqa: F401 - re-exported
from veriscale.harness.protocol.run_report import (
    DELIVERY_KEYS, crashed_state, outcome_document, phase_state, stopped_state,
)
from veriscale.harness.protocol.prompt_files import (
    AGENDA_ITEMS_IN_PROMPT, CONSENSUS_ITEMS_IN_PROMPT, agenda_text, consensus_text, load_phase_skills, render,
)
from veriscale.harness.safe_fs import read_bytes_beneath, resolved
from veriscale.harness.safe_write import write_plain_file
from veriscale.models.cancel import Stopped, current_stop, in_this_context, stopped
from veriscale.harness.workspace.contract import TaskWorkspace


Log = Callable[[str], None]


@dataclass
class ProtocolConfig:
    """How to run the protocol: model, contract, limits, jail, skills."""

    model_uri: str
    contract: str = "artifact"
    limits: AgentLimits = field(default_factory=AgentLimits)
    run_timeout_s: float = 120.0
    no_jail: bool = False
    skills_dirs: Sequence[Path] = ()
    jail_limits: JailLimits = field(default_factory=JailLimits)
    agenda_items_in_prompt: int = AGENDA_ITEMS_IN_PROMPT
    consensus_items_in_prompt: int = CONSENSUS_ITEMS_IN_PROMPT

    def __post_init__(self) -> None:
        if self.contract not in CONTRACTS:
            raise UserError(f"unknown contract '{self.contract}': use one of {', '.join(CONTRACTS)}")


class _Protocol:
    """One task's protocol run; see :func:`run_protocol`."""

    def __init__(self, task_dir: Path, layout: RunLayout, config: ProtocolConfig, executor: Executor,
                 log: Log, slots: threading.Semaphore | None) -> None:
        self.task = TaskWorkspace.open(resolved(task_dir, "task folder"))
        self.layout = layout
        self.config = config
        self.executor = executor
        self.log = log
        self.slots = slots or threading.Semaphore(2)
        self.store_run_id: int | None = None  # the store's run of this task (set by run_protocol)
        self.labels = [r.label for r in self.task.rollouts]
        self.phases: dict[str, dict[str, Any]] = {}
        self.agenda: dict[str, Any] = {"items": []}
        self.claims: dict[str, Any] = {"claims": []}

    # -- setup ---------------------------------------------------------------------------------
    def build_claims(self) -> None:
        from veriscale.harness.claims.claim_map import build_agenda, build_claim_map
        from veriscale.harness.claims.report import write_claim_map

        if len(self.labels) < 2:
            self.log(f"{self.task.name}: one rollout, so no claim map (agenda empty)")
            return
        claim_map = build_claim_map(self.task.path)
        write_claim_map(claim_map, self.layout.claims_dir)
        self.claims = claim_map.to_dict()
        self.agenda = build_agenda(claim_map)

    def context(self, phase: str) -> RecordContext:
        resolver = self.valid_record("resolve")
        challenger = self.valid_record("challenge")
        return RecordContext(agenda=self.agenda, rollouts=self.labels, contract=self.config.contract,
                             evidence_ids=evidence_ids(resolver, challenger) if phase in ("adjudicate", "deliver") else set())

    def valid_record(self, phase: str) -> Any | None:
        state = self.phases.get(phase)
        if state is None or state["status"] != "completed":
            return None
        doc, problems = read_record(self.layout.record(phase), RECORD_KIND[phase], self.context_for_read(phase))
        return doc if not problems else None

    def context_for_read(self, phase: str) -> RecordContext:
        if phase in ("resolve", "challenge"):
            return RecordContext(agenda=self.agenda, rollouts=self.labels, contract=self.config.contract)
        return self.context(phase)

    def common(self, phase: str, extra: dict[str, Path]) -> str:
        extra_lines = "".join(f"- {name}: {path}\n" for name, path in extra.items())
        return render("common", phase=phase, task=self.task.path, extra=extra_lines,
                      output=self.layout.session_dir(phase), data_rule=DATA_RULE)

    # -- phase bookkeeping ---------------------------------------------------------------------
    def resumable(self, phase: str) -> bool:
        """A phase is finished when its state says so and its record still validates."""
        state = read_json(self.layout.phase_file(phase))
        if not state or state.get("status") != "completed":
            return False
        self.phases[phase] = state
        _, problems = read_record(self.layout.record(phase), RECORD_KIND[phase], self.context_for_read(phase))
        if phase == "deliver" and not self.layout.delivery_report.is_file():
            problems.append("delivery report missing")
        if problems:
            del self.phases[phase]
            return False
        return True

    def finish_phase(self, phase: str, result: SessionResult | None, *, status: str | None = None,
                     reason: str = "", extra: dict[str, Any] | None = None) -> dict[str, Any]:
        record = self.layout.record(phase)
        _, problems = read_record(record, RECORD_KIND[phase], self.context_for_read(phase))
        state = phase_state(phase, record, problems, result, status=status, reason=reason, extra=extra)
        self.phases[phase] = state
        write_json(self.layout.phase_file(phase), state)
        final = state["status"]
        self.log(f"{self.task.name}: {phase} {final}" + (f" ({state['reason']})" if final == "failed" else ""))
        return state

    def session(self, phase: str, system: str, user: str, visible: list[Path], *, continue_session: bool = False) -> SessionResult:
        record = self.layout.record(phase)
        spec = SessionSpec(
            phase=phase, system_prompt=system, user_prompt=user, task_dir=self.task.path,
            output_dir=self.layout.session_dir(phase), transcript_path=self.layout.transcript(phase),
            model_uri=self.config.model_uri, record_path=record,
            record_check=record_check(RECORD_KIND[phase], self.context_for_read(phase)),
            visible_dirs=[p for p in visible if p.exists()], limits=self.config.limits,
            jail_limits=self.config.jail_limits, store_run_id=self.store_run_id,
            run_timeout_s=self.config.run_timeout_s, no_jail=self.config.no_jail, continue_session=continue_session)
        with self.slots:
            stopped(current_stop())  # the run was stopped while this phase waited for a slot
            self.log(f"{self.task.name}: {phase} started ({self.executor.name})")
            try:
                return self.executor.run_session(spec)
            except UserError as exc:
                return SessionResult(phase=phase, executor=self.executor.name, status="failed", reason=worded(exc.template))

    def fresh(self, phase: str) -> None:
        """Clear what an unfinished earlier attempt of ``phase`` left."""
        folder = self.layout.session_dir(phase)
        if phase == "deliver":
            for path in (self.layout.record("deliver"), self.layout.delivery_report):
                path.unlink(missing_ok=True)
            shutil.rmtree(folder / "out", ignore_errors=True)
            shutil.rmtree(self.layout.delivery_dir, ignore_errors=True)
            adjudication = read_json(self.layout.phase_file("adjudicate")) or {}
            keep = adjudication.get("transcript_lines")
            transcript = self.layout.transcript("deliver")
            if keep is not None and transcript.is_file():
                lines = transcript.read_text(encoding="utf-8").splitlines(keepends=True)
                transcript.write_text("".join(lines[:keep]), encoding="utf-8")
            return
        shutil.rmtree(folder, ignore_errors=True)
        self.layout.transcript(phase).unlink(missing_ok=True)
        folder.mkdir(parents=True, exist_ok=True)

    # -- phases --------------------------------------------------------------------------------
    def run_resolve(self) -> None:
        self.run_ledger_phase("resolve", agenda=fence("AGENDA", agenda_text(self.agenda, self.config.agenda_items_in_prompt)))

    def run_challenge(self) -> None:
        self.run_ledger_phase("challenge", consensus=fence(
            "CONSENSUS", consensus_text(self.claims, self.config.consensus_items_in_prompt)))

    def run_ledger_phase(self, phase: str, **data: str) -> None:
        """Run resolve or challenge: the claim map in view, ``data`` (fenced) in the prompt."""
        skills = load_phase_skills(phase, self.config.skills_dirs)
        system = self.common(phase, {"claims": self.layout.claims_dir}) + "\n" + render(
            phase, claims=self.layout.claims_dir, record=self.layout.record(phase), **data) + skills
        user = render(f"{phase}-task", task=fence("TASK", self.task.task_text()))
        result = self.session(phase, system, user, self.layout.visible_dirs(phase, self.config.skills_dirs))
        self.finish_phase(phase, result)

    def stage_evidence(self) -> list[str]:
        """Copy the valid ledgers to ``evidence/``; return one status line per ledger."""
        shutil.rmtree(self.layout.evidence_dir, ignore_errors=True)
        self.layout.evidence_dir.mkdir(parents=True)
        lines = []
        for phase, name in (("resolve", "resolver"), ("challenge", "challenger")):
            if self.valid_record(phase) is not None:
                record = self.layout.record(phase)  # read without following links, written afresh
                write_plain_file(self.layout.evidence_dir / f"{name}.json",
                                 read_bytes_beneath(record.parent, record.name, max_bytes=MAX_RECORD_BYTES))
                lines.append(f"- {name}.json: valid (cite its entries as {name}:<id>)")
            else:
                why = self.phases.get(phase, {}).get("reason", "not run")
                lines.append(f"- {name} ledger: missing, its session failed; decide without it. "
                             f"Why it failed:\n{fence(name.upper() + '_FAILURE', str(why))}")
        return lines

    def run_adjudicate(self) -> None:
        status_lines = self.stage_evidence()
        skills = load_phase_skills("adjudicate", self.config.skills_dirs)
        system = self.common("adjudicate", {"evidence": self.layout.evidence_dir}) + "\n" + render(
            "adjudicate", contract=self.config.contract,
            contract_rule=render(f"contract-{self.config.contract}").strip(),
            evidence=self.layout.evidence_dir, ledger_status="\n".join(status_lines),
            record=self.layout.record("adjudicate")) + skills
        user = render("adjudicate-task", task=fence("TASK", self.task.task_text()))
        result = self.session("adjudicate", system, user, self.layout.visible_dirs("adjudicate", self.config.skills_dirs))
        transcript = self.layout.transcript("adjudicate")
        lines = len(transcript.read_text(encoding="utf-8").splitlines()) if transcript.is_file() else 0
        self.finish_phase("adjudicate", result, extra={"transcript_lines": lines})

    def base_dir(self, base: str) -> Path | None:
        if base == BASE_NONE:
            return None
        return next(r.deliverables_dir for r in self.task.rollouts if r.label == base)

    def run_deliver(self, finish: dict[str, Any]) -> None:
        base = finish["base"]
        base_dir = self.base_dir(base)
        out = self.layout.deliverables_dir
        copy_base(base_dir, out)
        record = self.layout.record("deliver")
        result = None
        if self.config.contract == "pick-only":
            write_json(record, {"base": base, "changes": [], "notes": "pick-only contract: the base delivered as it is"})
        else:
            skills = load_phase_skills("deliver", self.config.skills_dirs)
            user = render("deliver", base=base if base != BASE_NONE else "none: start from an empty folder",
                          deliverables=out, finish=self.layout.record("adjudicate"), record=record, skills=skills)
            result = self.session("deliver", "", user, self.layout.visible_dirs("deliver", self.config.skills_dirs),
                                  continue_session=True)
        state_probe = read_record(record, "repair", self.context("deliver"))[1]
        session_failed = (result is not None and not result.ok) or bool(state_probe)
        if session_failed:
            copy_base(base_dir, out)  # a failed repair delivers the untouched base
        report = keep_base_files(base_dir, out)
        published = publish_delivery(out, finish, self.layout.delivery_dir)
        report.update({"base": base, "contract": self.config.contract, "fell_back_to_base": session_failed,
                       "deliverables_dir": str(published / DELIVERABLES_SUBDIR)})
        write_json(self.layout.delivery_report, report)
        self.finish_phase("deliver", result, extra={"delivery": {k: report[k] for k in DELIVERY_KEYS}})

    # -- the whole run -------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        started = time.monotonic()
        self.layout.root.mkdir(parents=True, exist_ok=True)
        if self.config.no_jail:
            self.log(worded(f"{self.task.name}: {JAIL_OFF_MESSAGE.template}"))
        self.build_claims()
        pending = []
        for phase in ("resolve", "challenge"):
            if self.resumable(phase):
                self.phases[phase]["resumed"] = True
                self.log(f"{self.task.name}: {phase} already finished, not rerun")
            else:
                self.fresh(phase)
                pending.append(getattr(self, f"run_{phase}"))
        threads = [threading.Thread(target=in_this_context(self._guard), args=(fn,), name=f"{self.task.name}-{fn.__name__}")
                   for fn in pending]  # each shares the run's stop flag (a Ctrl-C stops both)
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        stopped(current_stop())

        # A phase whose inputs were just (re)made is rerun even if an older record of it is valid.
        rerun = bool(pending)
        if not rerun and self.resumable("adjudicate"):
            self.phases["adjudicate"]["resumed"] = True
            self.log(f"{self.task.name}: adjudicate already finished, not rerun")
        else:
            rerun = True
            self.fresh("adjudicate")
            self._guard(self.run_adjudicate)
            stopped(current_stop())
        finish = self.valid_record("adjudicate")
        if finish is None:
            self.phases["deliver"] = {"phase": "deliver", "status": "skipped",
                                      "reason": "no valid finish.json, so no base was chosen"}
            write_json(self.layout.phase_file("deliver"), self.phases["deliver"])
            self.layout.delivery_report.unlink(missing_ok=True)
            shutil.rmtree(self.layout.delivery_dir, ignore_errors=True)
        elif not rerun and self.resumable("deliver"):
            self.phases["deliver"]["resumed"] = True
            self.log(f"{self.task.name}: deliver already finished, not rerun")
        else:
            self.fresh("deliver")
            self._guard(lambda: self.run_deliver(finish))
            stopped(current_stop())
        return self.outcome(finish, time.monotonic() - started)

    def _guard(self, fn: Callable[[], None]) -> None:
        """Run a phase; an unexpected error is recorded on the phase instead of ending the run."""
        name = getattr(fn, "__name__", "phase").removeprefix("run_")
        phase = name if name in PHASES else "deliver"
        try:
            fn()
        except Stopped:  # the run was stopped (Ctrl-C, SIGTERM): the caller ends the task as cancelled
            state = stopped_state(phase)
            self.phases[phase] = state
            write_json(self.layout.phase_file(phase), state)
            self.log(f"{self.task.name}: {phase} cancelled")
        except Exception as exc:  # noqa: BLE001 - one failing phase must not stop the protocol
            state = crashed_state(phase, exc)
            self.phases[phase] = state
            write_json(self.layout.phase_file(phase), state)
            self.log(f"{self.task.name}: {phase} failed ({state['reason']})")

    def outcome(self, finish: dict[str, Any] | None, wall_s: float) -> dict[str, Any]:
        delivery = read_json(self.layout.delivery_report) if finish is not None else None
        header = {
            "task": self.task.name, "task_dir": str(self.task.path), "run_dir": str(self.layout.root),
            "model": self.config.model_uri, "executor": self.executor.name, "contract": self.config.contract,
            "jail": "off" if self.config.no_jail else "on",
        }
        document = outcome_document(header, finish, delivery, self.phases, self.layout.delivery_dir, wall_s)
        write_json(self.layout.outcome_file, document)
        return document


def run_protocol(task_dir: Path, layout: RunLayout, config: ProtocolConfig, executor: Executor, *,
                 log: Log | None = None, slots: threading.Semaphore | None = None,
                 store_run_id: int | None = None) -> dict[str, Any]:
    """Run (or resume) the protocol on one materialised task; returns the outcome document.

    ``slots`` caps how many sessions run at once (shared across tasks by the runner).
    """
    protocol = _Protocol(task_dir, layout, config, executor, log or (lambda _line: None), slots)
    protocol.store_run_id = store_run_id
    return protocol.run()
