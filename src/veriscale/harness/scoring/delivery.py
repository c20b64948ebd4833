"""What a run delivered, and the scores ``materialize`` archived for its rollouts.

``read_run`` reads only the host-written ``delivery/`` folder of a run (see
:mod:`veriscale.harness.protocol.layout`); files a session wrote are never graded.

Usage::

    delivery = read_run(Path("tasks/t1.runs/run-1"))        # Delivery(deliverables=..., base="r03", ...)
    delivery = explicit_delivery(Path("out/"), "none")       # --delivered DIR --base none
    read_archive(Path("tasks/t1"))["scores"]                 # {"r01": 0.7, ...}
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from veriscale.data.reader import BadInput, parse_json
from veriscale.errors import UserError, setting
from veriscale.harness.safe_fs import UnsafePath, lstat_beneath, open_dir_beneath, read_text_beneath
from veriscale.harness.protocol.layout import DELIVERY_DIR, FINISH_FILE
from veriscale.harness.workspace import contract as ws

NO_BASE = "none"


@dataclass(frozen=True)
class Delivery:
    """A session's delivery: its deliverables folder and adjudication's choice of base."""

    deliverables: Path
    base: str | None
    revisions: tuple[Any, ...] = ()
    unresolved: tuple[Any, ...] = ()
    finish_file: Path | None = None


def _read_finish(folder: Path) -> dict[str, Any]:
    path = folder / FINISH_FILE
    try:
        data = parse_json(read_text_beneath(folder, FINISH_FILE, max_bytes=4 << 20), f"finish file '{path}'")
    except (UnsafePath, OSError, UnicodeDecodeError, json.JSONDecodeError, BadInput) as exc:
        raise UserError(f"finish file '{path}' is not readable JSON ({exc}): rerun the delivery or give "
                        f"{setting('delivered')} and {setting('base')}") from None
    if not isinstance(data, dict) or not isinstance(data.get("base"), str):
        raise UserError(f"finish file '{path}' needs a string \"base\" (a rollout label like r03, or \"none\")")
    for key in ("revisions", "unresolved"):
        if not isinstance(data.get(key, []), list):
            raise UserError(f"finish file '{path}' has a non-list \"{key}\": it must be a JSON list")
    return data


def read_run(run_dir: Path) -> Delivery:
    """The delivery the host wrote at the end of a run: ``<run_dir>/delivery/{finish.json,deliverables/}``.

    Nothing else in the run folder is looked at: files a session wrote (its own ``finish.json``,
    a ``deliverables/`` folder, links) are never graded. Links on the way are refused.
    """
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise UserError(f"run folder '{run_dir}' does not exist: give the folder a harness run wrote")
    folder = run_dir / DELIVERY_DIR
    try:
        lstat_beneath(run_dir, DELIVERY_DIR)
        os.close(open_dir_beneath(run_dir, DELIVERY_DIR))
    except (UnsafePath, OSError):
        raise UserError(f"run folder '{run_dir}' holds no {DELIVERY_DIR}/ folder (written by the host when "
                        f"delivery ends): finish the delivery or pass {setting('delivered', 'DIR')} and {setting('base', 'rNN')}") from None
    data = _read_finish(folder)
    try:
        os.close(open_dir_beneath(folder, ws.DELIVERABLES_DIR))
    except (UnsafePath, OSError):
        raise UserError(f"delivery folder '{folder}' has no {ws.DELIVERABLES_DIR}/ folder: "
                        f"rerun the delivery or pass {setting('delivered', 'DIR')} and {setting('base', 'rNN')}") from None
    return Delivery(deliverables=folder / ws.DELIVERABLES_DIR, base=_base_label(data["base"]),
                    revisions=tuple(data.get("revisions", [])),
                    unresolved=tuple(data.get("unresolved", [])), finish_file=folder / FINISH_FILE)


def _base_label(base: str | None) -> str | None:
    if base is None or base.strip().lower() in (NO_BASE, ""):
        return None
    return base.strip()


def explicit_delivery(deliverables: Path, base: str) -> Delivery:
    """A delivery given by hand: ``--delivered DIR --base rNN`` (or ``--base none``)."""
    if not Path(deliverables).is_dir():
        raise UserError(f"delivered folder '{deliverables}' does not exist: give the folder of delivered files")
    return Delivery(deliverables=Path(deliverables), base=_base_label(base))


# --- the archive ---------------------------------------------------------------------------


def read_archive(task_dir: Path, archive_dir: Path | None = None) -> dict[str, Any]:
    """The archive ``materialize`` wrote for ``task_dir``: ``{"scores": {label: score}, "label_map": ...}``."""
    path = ws.archive_path(Path(task_dir), archive_dir)
    if not path.is_file():
        raise UserError(f"archive '{path}' does not exist: set {setting('archive_dir')} to where materialize wrote <task>.scores.json")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UserError(f"archive '{path}' is not valid JSON ({exc}): re-materialise the task") from exc
    if not isinstance(data, dict) or not isinstance(data.get("scores"), dict):
        raise UserError(f"archive '{path}' has no \"scores\" map: re-materialise the task")
    return data


def _archived_scores(archive: dict[str, Any], where: Path) -> dict[str, float | None]:
    scores: dict[str, float | None] = {}
    for label, value in archive["scores"].items():
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise UserError(f"archive of '{where}' has a non-numeric score for {label} ({value!r}): fix the source scores.json")
        scores[label] = None if value is None else float(value)
    return scores
