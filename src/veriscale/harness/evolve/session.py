"""The evolve session: one model call that reads the failures and proposes new or changed skills.

Everything taken from a run is untrusted: the task text and the delivered files are read by the
injection detector (:func:`veriscale.verify.injection.detect`; its hits are reported per failure),
shown under the chosen mitigation (:func:`veriscale.verify.resist.candidate_text`, the warning
sentence when it warns) and fenced as data blocks (:func:`veriscale.fence.fence`). The grader's
feedback is fenced too. The call goes through the gateway (cached and recorded in the store)::

    prompt = build_prompt(scored.failures, skills, mitigation="both", detect_injections=True)
    reply = ask(backend, prompt, store=store)       # the reply's text
    prompt.injection                                # {"data_cleanup": [{"file": ..., "rule": ..., "text": ...}]}
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from veriscale.fence import DATA_RULE, fence
from veriscale.harness.evolve.failures import Failure
from veriscale.harness.safe_fs import UnsafePath, read_text_beneath
from veriscale.harness.skills.library import Skill
from veriscale.harness.workspace import contract as ws
from veriscale.verify.injection import detect
from veriscale.verify.resist import WARNING, candidate_text, warns

PROMPT_VERSION = "harness-evolve/1"
PHASE_MARKER = "Phase: evolve"
MAX_FILE_CHARS = 3000
MAX_FAILURE_CHARS = 8000
MAX_SKILL_CHARS = 2500
MAX_SKILLS_CHARS = 24000
MAX_REPLY_TOKENS = 4096

SYSTEM = """You improve the skill library of a verification harness. A skill is a short method text \
(SKILL.md, optionally with one script) that tells a verification session what to check and how; \
skills are reused on other tasks, so a skill holds methods, never a task's answer.

You get failures: tasks whose delivered files a grader scored below 1, with the grader's feedback, \
the task text and the delivered files. Find what method would have caught each failure, and propose \
new skills or changes to existing ones.

Rules:
- Never copy a number, name, label or value from the feedback, the task, the files or the scores \
into a proposal: every proposal is checked, and one that holds such a value is rejected.
- A skill's name is <phase>-<name> with phase one of evidence, resolve, falsify, repair; its SKILL.md \
starts with frontmatter (name, description, phase, applies-to) between '---' lines, then the method.
- To change an existing skill, give its full new SKILL.md under the same name.
- Name in "addresses" the failure ids each proposal addresses.

Answer with one JSON object and nothing else:
{"proposals": [{"skill": "<phase>-<name>", "addresses": ["<failure id>"], "why": "<one sentence>", \
"skill_md": "<the whole SKILL.md>", "script": null}]}
("script" may instead be {"name": "check.py", "text": "<a standalone python3 program>"}.)"""


@dataclass
class Prompt:
    """The session's messages and the injection hits found in what they quote."""

    messages: list[dict[str, str]]
    injection: dict[str, list[dict[str, Any]]] = field(default_factory=dict)


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + f"\n[... {len(text) - limit} characters cut]"


def _delivered_texts(folder: Path | None) -> list[tuple[str, str]]:
    """(name, text) of each readable text file delivered (text views for office files), capped."""
    if folder is None or not folder.is_dir():
        return []
    out: list[tuple[str, str]] = []
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and not p.is_symlink()):
        rel = path.relative_to(folder).as_posix()
        try:
            text = read_text_beneath(folder, rel, max_bytes=1 << 20)
        except (UnsafePath, OSError, UnicodeDecodeError, ValueError):
            continue  # binary (an office file: its text view beside it is read instead) or unreadable
        out.append((rel, _cut(text, MAX_FILE_CHARS)))
    return out


def build_prompt(failures: Sequence[Failure], skills: Sequence[Skill], *, mitigation: str = "none",
                 detect_injections: bool = True) -> Prompt:
    """The evolve session's messages over ``failures`` and the current ``skills``."""
    injection: dict[str, list[dict[str, Any]]] = {}
    blocks: list[str] = []
    for failure in failures:
        parts: list[tuple[str, str]] = []
        if failure.task_dir is not None:
            spec = failure.task_dir / ws.SPEC_DIR / ws.TASK_FILE
            try:
                parts.append(("task", _cut(read_text_beneath(failure.task_dir, f"{ws.SPEC_DIR}/{ws.TASK_FILE}",
                                                             max_bytes=1 << 20), MAX_FILE_CHARS)))
            except (UnsafePath, OSError, UnicodeDecodeError, ValueError):
                parts.append(("task", f"(task text not readable at {spec.name})"))
        parts.extend(_delivered_texts(failure.delivered))
        used, shown = 0, []
        for name, text in parts:
            if detect_injections and (hit := detect(text)) is not None:
                injection.setdefault(failure.id, []).append({"file": name, **hit.to_dict()})
            text = _cut(candidate_text(text, mitigation), max(0, MAX_FAILURE_CHARS - used))
            used += len(text)
            shown.append(f"{'Task text' if name == 'task' else 'Delivered file ' + name}:\n"
                         f"{fence('TASK' if name == 'task' else 'DELIVERED_FILE', text)}")
        blocks.append(f"### Failure {failure.id} (task {failure.task}, score {failure.score:.3f})\n"
                      f"Grader feedback:\n{fence('FEEDBACK', failure.feedback)}\n" + "\n".join(shown))
    skill_texts, used = [], 0
    for skill in skills:
        text = _cut(skill.path.read_text(encoding="utf-8"), MAX_SKILL_CHARS)
        if used + len(text) > MAX_SKILLS_CHARS:
            skill_texts.append(f"- {skill.name} ({skill.phase}): {skill.description}")
            continue
        used += len(text)
        skill_texts.append(f"#### {skill.name}\n{text}")
    system = SYSTEM + "\n\n" + DATA_RULE + (f"\n\n{WARNING}" if warns(mitigation) else "")
    user = ("## Current skills\n" + "\n".join(skill_texts) + "\n\n## Failures\n" + "\n\n".join(blocks)
            + f"\n\nFailure ids: {', '.join(f.id for f in failures)}\n{PHASE_MARKER}\n")
    return Prompt(messages=[{"role": "system", "content": system}, {"role": "user", "content": user}],
                  injection=injection)


def ask(backend: Any, prompt: Prompt, *, store: Any = None, run_id: int | None = None) -> str:
    """Send the prompt through the gateway; the reply's text (``ModelCallError`` when the call fails)."""
    from veriscale.engine.sync_facade import CallExecutor

    gateway = CallExecutor(backend, store, prompt_version=PROMPT_VERSION, run_id=run_id)
    reply = gateway.chat(prompt.messages, max_tokens=MAX_REPLY_TOKENS, temperature=0.0, label="evolve")
    return reply.content or ""
