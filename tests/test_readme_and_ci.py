"""The README's two set-up commands stay true, and CI runs exactly its test command."""

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def readme_commands() -> list[str]:
    text = (REPO / "README.md").read_text()
    block = text.split("```sh", 1)[1].split("```", 1)[0]
    return [line.strip() for line in block.strip().splitlines() if line.strip()]


def test_readme_opens_with_exactly_two_commands():
    cmds = readme_commands()
    assert len(cmds) == 2
    assert "veriscale" in cmds[0] and "pytest" in cmds[1]


def test_ci_runs_exactly_the_readme_test_command():
    ci_lines = [line.strip() for line in (REPO / ".ci" / "run").read_text().splitlines()]
    assert readme_commands()[1] in ci_lines


def test_readme_main_job_inputs_exist():
    for token in readme_commands()[0].split():
        if token.startswith("examples/"):
            assert (REPO / token).exists(), token
