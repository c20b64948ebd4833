"""Records shaped like each importer's format, with generated contents (the mutations start here).

    name, record = format_record(gen)        # ("openai-messages", [...messages...]) and so on
    gen.mutate(record)                       # then wrong types, dropped keys, deep or huge values

Shapes follow the docstrings of the ``veriscale.data.importers`` modules; contents are generated
text (nasty strings included), so a record gets past each importer's detector into its loader.
"""

from __future__ import annotations

import json
from typing import Any, Callable

from tests.fuzz.strategies import Gen, dumps

ROLES = ["system", "developer", "user", "assistant", "agent", "tool", "function", "observation", "model", "ai"]
EXIT_TEXTS = ["<returncode>0</returncode>", "<returncode>1</returncode>", '{"returncode": 2, "output": "x"}',
              "exit code: 3", "Process exited with code 4", "exit code: " + "9" * 5000,
              "<returncode>" + "1" * 40 + "</returncode>", '{"exit_code": ' + "7" * 4400 + "}"]


def _role(gen: Gen) -> str:
    return gen.choice(ROLES) if gen.chance(0.85) else gen.short()


def content(gen: Gen) -> Any:
    roll = gen.rng.random()
    if roll < 0.5:
        return gen.text()
    if roll < 0.65:
        return gen.choice(EXIT_TEXTS)
    if roll < 0.7:
        return None
    return [gen.text() if gen.chance(0.3) else {"type": gen.choice(["text", "reasoning", "image", "input_image", "x"]),
                                                "text": gen.text(), "reasoning": gen.short()}
            for _ in range(gen.rng.randint(0, 3))]


def arguments(gen: Gen) -> Any:
    roll = gen.rng.random()
    if roll < 0.3:
        return gen.text()
    if roll < 0.7:
        return dumps(gen.json())
    return {gen.short(): gen.json() for _ in range(gen.rng.randint(0, 2))}


def tool_calls(gen: Gen) -> list[dict[str, Any]]:
    return [{"id": gen.short(), "type": "function", "function": {"name": gen.short(), "arguments": arguments(gen)}}
            for _ in range(gen.rng.randint(0, 2))]


def messages(gen: Gen, least: int = 1) -> list[dict[str, Any]]:
    out = []
    for _ in range(gen.rng.randint(least, 5)):
        message: dict[str, Any] = {"role": _role(gen), "content": content(gen)}
        if gen.chance(0.4):
            message["tool_calls"] = tool_calls(gen)
        if gen.chance(0.4):
            message["tool_call_id"] = gen.short()
        if gen.chance(0.2):
            message[gen.choice(["exit_code", "returncode", "error", "is_demo"])] = gen.json()
        out.append(message)
    return out


def _openai(gen: Gen) -> Any:
    roll = gen.rng.random()
    if roll < 0.4:
        return messages(gen)
    if roll < 0.8:
        return {"id": gen.short(), "reward": gen.json(), "messages": messages(gen)}
    return messages(gen)[0]


def _atif(gen: Gen) -> Any:
    steps = []
    for k in range(gen.rng.randint(0, 4)):
        results = [{"content": gen.choice([content(gen), gen.choice(EXIT_TEXTS),
                                           dumps({"returncode": gen.json(), "output": gen.text()})])}
                   for _ in range(gen.rng.randint(0, 2))]
        steps.append({"step_id": k, "source": gen.choice(["user", "agent", "system", "assistant"]) if gen.chance(0.9) else gen.short(),
                      "message": content(gen),
                      "tool_calls": [{"tool_name": gen.short(), "arguments": arguments(gen)} for _ in range(gen.rng.randint(0, 2))],
                      "observation": {"results": results} if gen.chance(0.7) else content(gen)})
    trajectory: dict[str, Any] = {"schema_version": gen.choice(["ATIF-v1.2", "atif", "x"]), "steps": steps, "agent": gen.json()}
    if gen.chance(0.3):
        return trajectory
    return {"trial_name": gen.short(), "task_name": gen.short(), "reward": gen.json(),
            "trajectory": json.dumps(trajectory, default=str) if gen.chance(0.2) else trajectory,
            "verifier_result": {"rewards": {gen.short(): gen.json()}}}


def _swe_agent(gen: Gen) -> Any:
    return {"trajectory": [{"thought": content(gen), "action": content(gen), "observation": gen.choice([content(gen), gen.choice(EXIT_TEXTS)])}
                           for _ in range(gen.rng.randint(0, 4))],
            "history": messages(gen), "info": {"exit_status": gen.short(), "submission": content(gen)},
            "replay_config": gen.text() if gen.chance(0.5) else json.dumps({"problem_statement": {"text": gen.text(), "id": "p"}}),
            "instance_id": gen.short()}


def _mini_swe_agent(gen: Gen) -> Any:
    steps = [{"role": _role(gen), "content": f"THOUGHT: {gen.text()}\n```bash\n{gen.text()}\n```" if gen.chance(0.5) else content(gen)}
             for _ in range(gen.rng.randint(1, 5))]
    if gen.chance(0.5):
        return {"trajectory_format": "mini-swe-agent-1", "messages": steps,
                "info": {"submission": content(gen), "exit_status": gen.short()}}
    return {"instance_id": gen.short(), "problem_statement": content(gen), "resolved": gen.json(), "steps": steps,
            "final_patch": content(gen)}


def inspect_sample(gen: Gen) -> dict[str, Any]:
    return {"id": gen.json(), "epoch": gen.json(), "input": gen.text() if gen.chance(0.5) else messages(gen),
            "target": gen.json(), "messages": messages(gen),
            "output": {"completion": content(gen), "choices": [{"message": {"content": content(gen)}} for _ in range(gen.rng.randint(0, 2))]},
            "scores": {gen.short(): {"value": gen.choice(["C", "I", "P", "N"]) if gen.chance(0.6) else gen.json()} if gen.chance(0.8) else gen.json()
                       for _ in range(gen.rng.randint(0, 2))}}


def _inspect(gen: Gen) -> Any:
    return {"eval": {"task": gen.short(), "model": gen.short()}, "samples": [inspect_sample(gen) for _ in range(gen.rng.randint(0, 3))]}


def _swebench(gen: Gen) -> Any:
    def prediction() -> dict[str, Any]:
        return {"instance_id": gen.short(), "model_patch": content(gen), "model_name_or_path": gen.short(),
                "problem_statement": content(gen)}

    roll = gen.rng.random()
    if roll < 0.4:
        return prediction()
    if roll < 0.7:
        return [prediction() for _ in range(gen.rng.randint(1, 7))]
    return {gen.short() + str(k): {k2: v for k2, v in prediction().items() if k2 != "instance_id"} for k in range(gen.rng.randint(1, 7))}


def _step_solutions(gen: Gen) -> Any:
    return {"id": gen.short(), "problem": gen.text(), "steps": [gen.text() for _ in range(gen.rng.randint(0, 4))],
            "label": gen.choice([-3, -1, 0, 1, 2, 5, 2 ** 64, True])}


#: format name -> a builder of records of that shape
FORMATS: dict[str, Callable[[Gen], Any]] = {
    "openai-messages": _openai, "atif": _atif, "swe-agent": _swe_agent, "mini-swe-agent": _mini_swe_agent,
    "inspect-log": _inspect, "swebench-predictions": _swebench, "step-solutions": _step_solutions}


def format_record(gen: Gen) -> tuple[str, Any]:
    """``(format name, record)`` for one of the JSON formats an importer reads."""
    name = gen.choice(sorted(FORMATS))
    return name, FORMATS[name](gen)


def plain_text(gen: Gen) -> str:
    """Text for a text, Markdown or diff file: generated lines, nasty ones included."""
    return "\n".join(gen.choice([gen.text(), "line", "# Task", "@@ -1 +1 @@", "--- a/x", "+++ b/x"])
                     for _ in range(gen.rng.randint(0, 6)))
