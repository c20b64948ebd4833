"""Library messages name settings, never flags; the CLI turns the settings into flags.

A library error says ``max_calls`` to a Python caller and ``--max-calls`` on the command line,
because it is written with ``setting("max_calls")``. These tests keep it that way: no flag text
in library raises or notices, every setting named has a flag, and the two spellings really come out.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

from tests.support.scripted_model import ScriptedScoreModel
from veriscale.cli.flags import FLAG_FOR, cli_text
from veriscale.engine.sync_facade import CallExecutor, PlannedCall
from veriscale.errors import BudgetExceeded, UserError, setting, settings_in
from veriscale.models.base import Message, ScoreRequest

SRC = Path(__file__).resolve().parents[1] / "src" / "veriscale"
CLI = SRC / "cli"
SKILLS = SRC / "harness" / "skills"  # standalone scripts with their own argparse flags
FLAG = re.compile(r"(?<![\w-])--[a-z][a-z-]+")
OTHER_COMMAND = re.compile(r"pip install [^)]*")  # advice to run another program keeps that program's flags


def _library_files() -> list[Path]:
    return [p for p in sorted(SRC.rglob("*.py")) if CLI not in p.parents and SKILLS not in p.parents]


def _texts(node: ast.AST) -> list[str]:
    """The string constants and f-string literal parts inside ``node``."""
    return [n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)]


def _callee(call: ast.Call) -> str:
    func = call.func
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""


def _message_nodes(tree: ast.AST) -> list[ast.AST]:
    """Arguments of ``raise SomethingError(...)`` / ``raise BudgetExceeded(...)`` and the values
    of module-level ``*NOTICE*`` / ``*MESSAGE*`` constants."""
    found: list[ast.AST] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call):
            name = _callee(node.exc)
            if name.endswith("Error") or name == "BudgetExceeded":
                found += [*node.exc.args, *(k.value for k in node.exc.keywords)]
    for node in getattr(tree, "body", []):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        if node_value := getattr(node, "value", None):
            for target in targets:
                if isinstance(target, ast.Name) and ("NOTICE" in target.id or "MESSAGE" in target.id):
                    found.append(node_value)
    return found


def test_library_messages_spell_no_flags() -> None:
    offending = []
    for path in _library_files():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in _message_nodes(tree):
            for text in _texts(node):
                if FLAG.search(OTHER_COMMAND.sub("", text)):
                    offending.append(f"{path.relative_to(SRC.parent)}:{node.lineno}: {text!r}")
    assert not offending, "library messages spell CLI flags; name settings with setting(...):\n" + "\n".join(offending)


def test_the_scan_sees_flags_where_they_are() -> None:
    tree = ast.parse('raise UserError(f"pass --max-calls {n}")\nEMBEDDED_NOTICE = ("use " "--model x")\n'
                     'raise ModelCallError("(pip install --force-reinstall x)")\nHELP = "--not-a-message"\n')
    texts = [t for node in _message_nodes(tree) for t in _texts(node)]
    assert [t for t in texts if FLAG.search(OTHER_COMMAND.sub("", t))] == ["pass --max-calls ", "use --model x"]


def _setting_names() -> list[tuple[str, str]]:
    names = []
    for path in sorted(SRC.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if (isinstance(node, ast.Call) and _callee(node) == "setting" and node.args
                    and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
                names.append((node.args[0].value, f"{path.relative_to(SRC.parent)}:{node.lineno}"))
    return names


def test_every_setting_named_has_a_flag() -> None:
    names = _setting_names()
    assert len(names) > 20  # the scan finds the library's references
    unknown = [f"{where}: {name}" for name, where in names if name not in FLAG_FOR]
    assert not unknown, "settings without a flag in veriscale.cli.flags.FLAG_FOR:\n" + "\n".join(unknown)


def test_every_flag_of_the_table_is_a_real_option() -> None:
    cli_source = "\n".join(p.read_text(encoding="utf-8") for p in sorted(CLI.glob("*.py")))
    options = set()
    for tree in (ast.parse(p.read_text(encoding="utf-8")) for p in sorted(CLI.glob("*.py"))):
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and _callee(node) == "Option":
                for arg in node.args:
                    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                        options.update(arg.value.split("/"))
    assert cli_source and options
    missing = sorted({flag for flag in FLAG_FOR.values() if flag not in options})
    assert not missing, f"FLAG_FOR names flags no typer option declares: {missing}"


def test_a_setting_reads_as_a_keyword_in_python_and_as_a_flag_on_the_command_line() -> None:
    text = f"raise {setting('max_calls')}, or try {setting('scale', 'letters:20')}"
    assert settings_in(text) == ["max_calls", "scale"]
    assert cli_text(text) == "raise --max-calls, or try --scale letters:20"


def _request(i: int) -> ScoreRequest:
    return ScoreRequest(messages=(Message("user", f"## Response\nGOOD {i}\n## Criterion\nX"),),
                        prefill="Grade:", labels=("A", "B", "C"))


def test_a_budget_error_names_max_calls_for_python_and_the_flag_for_the_cli() -> None:
    model = ScriptedScoreModel()
    with pytest.raises(BudgetExceeded) as info:
        CallExecutor(model, None, prompt_version="t", max_calls=1).run([PlannedCall(_request(i)) for i in range(3)])
    assert model.calls == []  # refused before spending
    err = info.value
    assert "max_calls" in str(err) and "--max-calls" not in str(err)
    assert "--max-calls" in cli_text(err.template) and "max_calls" not in cli_text(err.template)
    assert "max_calls" in settings_in(err.template)


def test_notes_read_with_python_names_and_keep_flags_for_the_cli() -> None:
    from veriscale.verify.reward import Verifier

    result = Verifier(ScriptedScoreModel(), repeats=3).score("task", "GOOD answer")
    note = next(n for n in result.notes if "K collapsed" in n)
    assert "\u2039" not in note and "use reasoning to sample" in note  # no raw markers for Python callers
    assert "use --reasoning to sample" in cli_text(note)
    assert "\u2039" not in json.dumps(result.to_dict())


def test_a_numeric_setting_value_reads_as_a_number() -> None:
    assert str(UserError(f"try {setting('repeats', 2)}")) == "try repeats=2"
    assert str(UserError(f"try {setting('scale', 'digits')}")) == "try scale='digits'"
