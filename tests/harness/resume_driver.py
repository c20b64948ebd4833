"""Runs the protocol on one task with a scripted chat double, for the SIGKILL-and-rerun test.

    python -m tests.harness.resume_driver TASK RUNS_ROOT STORE LOG [--block-at N] [--kill-at N]

Every model call the double answers is logged to LOG as ``start <sha>`` / ``done <sha>`` (the sha
of the messages), flushed at once, so a killed run leaves an exact record of which turns finished.
``--block-at N`` makes the resolver's N-th turn hang (the test kills the process there);
``--kill-at N`` SIGKILLs the process itself when the N-th model call of any phase starts. Each
phase's script is indexed by turn number, so a rerun that gets its first turns from the store
asks the double only for the turns after them.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import signal
import time
from pathlib import Path

from tests.support.scripted_chat import ScriptedChat, call, phase_of, say
from veriscale.engine.store import Store
from veriscale.harness.sessions.agent import AgentLimits
from veriscale.harness.sessions.executors import BuiltinExecutor
from veriscale.harness.protocol.layout import RunLayout
from veriscale.harness.protocol.task_protocol import ProtocolConfig, run_protocol

LEDGER = {"entries": [{"id": "R1", "claim": "report.md:year-over-year revenue growth (%)",
                       "question": "Which growth figure is right?", "checks": ["computed it"],
                       "findings": "the restated base gives 20.0%", "verdict": "20"}]}


class LoggedChat(ScriptedChat):
    def __init__(self, scripts: dict, log: Path, block_at: int | None, kill_at: int | None = None) -> None:
        super().__init__(scripts)
        self.log = log
        self.block_at = block_at
        self.kill_at = kill_at
        self.resolver_turns = 0
        self.calls = 0

    def chat(self, messages, **kwargs):
        sha = hashlib.sha256(json.dumps(messages, sort_keys=True).encode()).hexdigest()[:16]
        phase = "resolve" if any("Phase: resolve" in str(m.get("content")) for m in messages) else "other"
        with self.log.open("a") as handle:
            handle.write(f"start {phase} {sha}\n")
        self.calls += 1
        if self.calls == self.kill_at:
            os.kill(os.getpid(), signal.SIGKILL)
        if phase == "resolve":
            self.resolver_turns += 1
            if self.resolver_turns == self.block_at:
                time.sleep(600)
        # The turn number, not a queue: a rerun whose first turns come from the store asks for turn 3 first.
        script = self.scripts.get(phase_of(messages), [])
        turn = sum(1 for m in messages if m.get("role") == "assistant")
        reply = script[turn] if turn < len(script) else say("(script finished)")
        with self.log.open("a") as handle:
            handle.write(f"done {phase} {sha}\n")
        return reply


def main() -> None:
    ap = argparse.ArgumentParser()
    for name in ("task", "runs", "store", "log"):
        ap.add_argument(name, type=Path)
    ap.add_argument("--block-at", type=int)
    ap.add_argument("--kill-at", type=int)
    args = ap.parse_args()
    scripts = {
        "resolve": [call("write", path="notes/plan.md", content="check the growth figure\n"),
                    call("run", command="python3 -c \"open('calc.txt','w').write(str(round(600/500*100-100, 1)))\""),
                    call("write", path="ledger.json", content=json.dumps(LEDGER)),
                    say("done")],
        "challenge": [call("write", path="ledger.json", content=json.dumps({"entries": []})), say("done")],
        "adjudicate": [call("write", path="finish.json", content=json.dumps(
            {"base": "r01", "reason": "r", "revisions": [], "unresolved": []})), say("done")],
    }
    chat = LoggedChat(scripts, args.log, args.block_at, args.kill_at)
    config = ProtocolConfig(model_uri="scripted", contract="pick-only", no_jail=True,
                            limits=AgentLimits(max_steps=8, wall_clock_s=300))
    executor = BuiltinExecutor(chat, Store.open(args.store))
    run_protocol(args.task, RunLayout.for_task(args.task, "r", args.runs), config, executor)


if __name__ == "__main__":
    main()
