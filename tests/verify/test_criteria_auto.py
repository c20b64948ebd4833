"""``--criteria auto``: criteria the verifier model writes from the task's text, held to a JSON shape.

The shape is checked against the JSON schema on the real embedded model and on a real llama.cpp
server (the grammar guarantees it); a rerun is served from the cache; the rejection of criteria that
quote an expected output, and the one sentence for a model that cannot follow a grammar, run on
scripted doubles.
"""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import jsonschema
import pytest
from typer.testing import CliRunner

from tests.support.scripted_model import ScriptedScoreModel, registered_scheme
from veriscale.cli import app
from veriscale.engine.store import Store
from veriscale.engine.sync_facade import CallExecutor
from veriscale.errors import UserError
from veriscale.models.base import ChatResponse
from veriscale.verify.criteria import CriteriaSet, Criterion, load_criteria
from veriscale.verify.criteria_auto import (
    auto_count,
    criteria_markdown,
    generate_criteria,
    json_schema,
    parse_reply,
    references_in,
    screen,
)

TASK = "Write a shell command that prints how many lines the file notes.txt has."


class GrammarDouble(ScriptedScoreModel):
    """A scripted backend that takes a grammar, like a llama.cpp server whose probe found one."""

    chat_options = frozenset({"grammar"})

    def __init__(self, reply: dict[str, Any]) -> None:
        super().__init__()
        self.reply = reply
        self.sent: list[dict[str, Any]] = []

    def read_plan(self) -> Any:
        return SimpleNamespace(joint="grammar")

    def chat(self, messages: list[dict[str, Any]], **kw: Any) -> ChatResponse:
        self.sent.append({"messages": messages, **kw})
        return ChatResponse(content=json.dumps(self.reply))


def _crits(*pairs: tuple[str, str]) -> dict[str, Any]:
    return {"criteria": [{"name": n, "description": d} for n, d in pairs]}


def _valid(reply: str, count: int) -> list[dict[str, str]]:
    data = json.loads(reply)
    jsonschema.validate(data, json_schema(count))
    return data["criteria"]


def invoke(*args: str):
    return CliRunner().invoke(app, list(args))


# -- the pure parts -------------------------------------------------------------------------------
def test_auto_names_a_count_and_a_pack_name_is_no_auto() -> None:
    assert auto_count("auto") == 3 and auto_count("auto:5") == 5
    assert auto_count("general") is None and auto_count(None) is None and auto_count("automation.md") is None
    with pytest.raises(UserError, match="1 to 8"):
        auto_count("auto:0")


def test_a_criterion_quoting_the_expected_output_is_dropped_whatever_its_case_and_spacing() -> None:
    items = [Criterion("Count", "The reply prints the line count, which must be  FORTY two lines."),
             Criterion("Command", "The reply gives one shell command that reads notes.txt."),
             Criterion("command", "A second criterion under the same name.")]
    kept, rejected = screen(items, ["forty-two\nlines"])
    assert [c.name for c in kept] == ["Command"]
    assert rejected == [("Count", "quotes the task's expected output or a reference"),
                        ("command", "repeats another criterion's name")]
    assert screen(items[1:2], ["42"])[1] == []  # a reference that is not there drops nothing


def test_references_come_from_the_tasks_json_fields_but_never_the_task_text_itself() -> None:
    data = {"task": TASK, "answer": TASK, "expected_output": "42", "references": ["wc -l notes.txt", ""]}
    assert references_in(data, TASK) == ["42", "wc -l notes.txt"]


def test_a_reply_off_the_shape_is_one_sentence() -> None:
    for bad in ("not json", json.dumps(_crits(("A", "x" * 30))), json.dumps({"criteria": [{"name": "A"}] * 2})):
        with pytest.raises(UserError, match="JSON shape"):
            parse_reply(bad, 2, "m")


def test_saved_criteria_load_back_as_the_same_criteria(tmp_path: Path) -> None:
    crits = CriteriaSet("auto", "", (Criterion("Command", "One shell command that reads the file."),
                                     Criterion("Output", "It prints a single number and nothing else.")))
    path = tmp_path / "mine.md"
    path.write_text(criteria_markdown(crits, "for task.md"), encoding="utf-8")
    assert load_criteria(str(path)).items == crits.items


# -- scripted doubles ------------------------------------------------------------------------------
def test_generated_criteria_are_screened_and_the_call_is_cached(tmp_path: Path) -> None:
    double = GrammarDouble(_crits(("Count", "The reply prints exactly 42 as the number of lines."),
                                  ("Command", "The reply gives one shell command that reads notes.txt."),
                                  ("Quiet", "The reply prints nothing beyond the count itself.")))
    store = Store.open(tmp_path / "s.sqlite3")
    found = generate_criteria(CallExecutor(double, store, prompt_version="t"), TASK, count=3, references=["42"])
    assert [c.name for c in found.criteria.items] == ["Command", "Quiet"]
    assert found.rejected == [("Count", "quotes the task's expected output or a reference")]
    assert found.constraint == "grammar" and "root ::=" in double.sent[0]["options"]["grammar"]
    prompt = double.sent[0]["messages"][0]["content"]
    assert TASK in prompt and "Never state the expected answer" in prompt
    again = CallExecutor(double, store, prompt_version="other")
    assert generate_criteria(again, TASK, count=3, references=["42"]).cached
    assert len(double.sent) == 1 and again.usage.model_calls == 0


def test_too_few_left_after_screening_is_one_sentence(tmp_path: Path) -> None:
    double = GrammarDouble(_crits(("Count", "The response must print 42."), ("Number", "The number 42 appears in it.")))
    with pytest.raises(UserError, match=r"only 0 of the 2 generated criteria are usable"):
        generate_criteria(CallExecutor(double, None, prompt_version="t"), TASK, count=2, references=["42"])


def test_a_model_that_cannot_follow_a_grammar_is_one_sentence_naming_criteria_auto(tmp_path: Path) -> None:
    (tmp_path / "task.md").write_text(TASK, encoding="utf-8")
    (tmp_path / "a.md").write_text("wc -l notes.txt", encoding="utf-8")
    with registered_scheme("scripted", lambda uri: ScriptedScoreModel(), ("scripted",)):
        result = invoke("score", str(tmp_path / "task.md"), str(tmp_path / "a.md"), "--model", "scripted",
                        "--criteria", "auto", "--store", str(tmp_path / "s.sqlite3"))
    assert result.exit_code != 0 and isinstance(result.exception, SystemExit), result.output
    said = [line for line in result.output.splitlines() if line.startswith("error")]
    assert "Traceback" not in result.output and len(said) == 1
    assert "cannot hold its reply to a grammar" in result.output and "--criteria auto" in result.output


def test_auto_where_only_packs_are_taken_says_so() -> None:
    with pytest.raises(UserError, match="generated from one task's text"):
        load_criteria("auto")


def test_bench_compares_auto_against_a_pack_on_the_same_pairs(tmp_path: Path) -> None:
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text("\n".join(json.dumps({"instruction": f"Task {i}: count the lines.", "output_1": "GOOD wc -l",
                                           "output_2": "cat", "label": 1}) for i in range(2)) + "\n", encoding="utf-8")
    reply = _crits(("Command", "The reply gives one shell command for the count."),
                   ("Output", "The reply prints the number and nothing else."))
    with registered_scheme("scripted", lambda uri: GrammarDouble(reply), ("scripted",)):
        result = invoke("bench", str(pairs), "--model", "scripted", "--criteria", "general,auto:2", "--json",
                        "--store", str(tmp_path / "s.sqlite3"))
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)["rows"]
    assert [r["label"].split()[0] for r in rows] == ["criteria=general", "criteria=auto:2"]
    assert all(r["metrics"]["accuracy"] == 1.0 for r in rows)


# -- real models -----------------------------------------------------------------------------------
@pytest.mark.embedded
def test_the_embedded_model_writes_schema_valid_criteria_saved_and_reused_from_the_cache(tmp_path: Path) -> None:
    task = tmp_path / "task.json"
    task.write_text(json.dumps({"task": TASK, "expected_output": "wc -l < notes.txt"}), encoding="utf-8")
    (tmp_path / "a.md").write_text("wc -l notes.txt", encoding="utf-8")
    store, saved = tmp_path / "s.sqlite3", tmp_path / "crit.md"
    args = ["score", str(task), str(tmp_path / "a.md"), "--criteria", "auto:2", "--scale", "letters:2",
            "--store", str(store), "--json"]
    first = invoke(*args, "--save-criteria", str(saved))
    assert first.exit_code == 0, first.output
    payload = json.loads(first.stdout)
    generated = payload["criteria_generated"]
    assert generated["constraint"] == "grammar" and not generated["cached"]
    (reply,) = _chat_replies(store)
    assert len(_valid(reply, 2)) == 2  # the grammar held the reply to the schema
    kept = load_criteria(str(saved))  # the saved file is a pack that loads back
    assert [c.name for c in kept.items] == [c["name"] for c in generated["criteria"]]
    again = json.loads(invoke(*args).stdout)
    assert again["criteria_generated"]["cached"] and again["usage"]["model_calls"] == 0
    assert again["criteria"].keys() == payload["criteria"].keys()


@pytest.mark.server
def test_a_real_llama_cpp_server_writes_schema_valid_criteria_under_its_grammar(llama_server, tmp_path: Path) -> None:
    from veriscale.models.uri import load_backend

    backend = load_backend(f"{llama_server}#smollm2")
    ex = CallExecutor(backend, Store.open(tmp_path / "s.sqlite3"), prompt_version="t")
    for task in (TASK, "Translate 'good morning' into French."):
        found = generate_criteria(ex, task, count=2)
        assert found.constraint == "grammar" and 1 <= len(found.criteria.items) <= 2
    replies = _chat_replies(tmp_path / "s.sqlite3")
    assert len(replies) == 2 and all(len(_valid(r, 2)) == 2 for r in replies)


def _chat_replies(store: Path) -> list[str]:
    """The text of every chat reply in ``store`` (the generating calls)."""
    with closing(sqlite3.connect(store)) as conn:
        rows = conn.execute("SELECT response FROM calls WHERE kind = 'chat' AND status = 'ok'").fetchall()
    return [str(json.loads(r[0])["content"]) for r in rows]
