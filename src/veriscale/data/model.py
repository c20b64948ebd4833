"""The one data model every engine reads.

    task = Task(text="Sort the file numbers.txt")
    cand = Candidate(id="run-1", text="I ran sort -n ...", trajectory=None)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from veriscale.data.images import ImageRef


@dataclass
class Step:
    """One step of an agent run: who spoke, what they said or did, and what came back."""

    role: str  # "system" | "user" | "agent" | "tool" | "environment"
    text: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    observation: str = ""
    exit_code: int | None = None
    #: what came back for each tool call, by call id, where the format ties results to calls (ATIF, chat)
    tool_results: dict[str, str] = field(default_factory=dict)
    #: per-step time and tokens where the format has them (ATIF): timestamp, prompt_tokens, completion_tokens, ...
    metrics: dict[str, Any] = field(default_factory=dict)
    #: what the agent saw at this step (a screenshot, a camera frame), in order
    images: list[ImageRef] = field(default_factory=list)


@dataclass
class Trajectory:
    """An ordered list of steps plus what the run finally produced."""

    steps: list[Step] = field(default_factory=list)
    final_output: str = ""


@dataclass
class Task:
    """What the agent was asked to do."""

    text: str
    id: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)
    images: list[ImageRef] = field(default_factory=list)  # what the task shows (a goal picture, a page)


@dataclass
class Candidate:
    """One run (or answer) to verify. ``text`` is what the verifier reads when no trajectory."""

    id: str
    text: str = ""
    trajectory: Trajectory | None = None
    artifacts: dict[str, str] = field(default_factory=dict)  # name -> path
    labels: dict[str, Any] = field(default_factory=dict)  # e.g. {"reward": 1}
    source: str = ""  # file path or pool line it came from
    task: Task | None = None  # the task this run was given, when its file says so
    metadata: dict[str, Any] = field(default_factory=dict)  # model, cost, exit status, ...
    #: what the verifier looks at besides the text: screenshots, or a video's frames, in order
    images: list[ImageRef] = field(default_factory=list)
