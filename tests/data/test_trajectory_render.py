"""Rendering runs for a verifier prompt: budget, what is kept, markers, determinism."""

from __future__ import annotations

import copy
import re

import pytest

from veriscale.data.model import Candidate, Step, Task, Trajectory
from veriscale.data.render import render_candidate, render_run, render_task
from veriscale.data.step_text import has_error_signal
from veriscale.data.truncate import estimate_tokens, truncate_middle
from veriscale.errors import UserError

_HEADER = re.compile(r"^\[step (\d+)\] ", re.M)
_MARKER = re.compile(r"^\[\.\.\. (\d+) steps? elided \(steps? (\d+)(?:–(\d+))? ?\) \.\.\.\]$", re.M)


def _covered_steps(text: str) -> list[tuple[str, int, int]]:
    """('step'|'elided', first, last) blocks in the order they appear."""
    blocks = [(m.start(), "step", int(m.group(1)), int(m.group(1))) for m in _HEADER.finditer(text)]
    for m in _MARKER.finditer(text):
        first = int(m.group(2))
        last = int(m.group(3) or first)
        assert int(m.group(1)) == last - first + 1
        blocks.append((m.start(), "elided", first, last))
    return [b[1:] for b in sorted(blocks)]


def _assert_steps_accounted(text: str, n_steps: int) -> None:
    blocks = _covered_steps(text)
    expected = 1
    for _, first, last in blocks:
        assert first == expected, blocks
        expected = last + 1
    assert expected == n_steps + 1


def _long_run(n_steps: int = 300, obs_chars: int = 3000) -> Candidate:
    steps = []
    for i in range(n_steps):
        failing = i == 120
        steps.append(Step(
            role="agent",
            text=f"Step {i}: trying the next idea.",
            tool_calls=[{"name": "bash", "arguments": {"command": f"make test-{i}"}}],
            observation=("Traceback (most recent call last):\n  boom\n" if failing else "")
            + f"output line of step {i}\n" * (obs_chars // 22),
            exit_code=1 if failing else 0,
        ))
    return Candidate(id="long", trajectory=Trajectory(steps=steps, final_output="All tests pass now."))


@pytest.mark.parametrize("budget", [2000, 6000])
def test_every_terminal_bench_trial_fits_and_keeps_its_end(terminal_bench, budget):
    for candidate in terminal_bench:
        text = render_candidate(candidate, budget)
        assert estimate_tokens(text) <= budget, candidate.id
        n = len(candidate.trajectory.steps)
        assert f"[step {n}] " in text, candidate.id  # the last step is always there
        assert candidate.trajectory.final_output.strip()[:40] in text, candidate.id
        _assert_steps_accounted(text, n)
        size = sum(len(s.text) + len(s.observation) for s in candidate.trajectory.steps) // 4
        if size > 2 * budget:  # a long run uses most of the budget
            assert estimate_tokens(text) >= budget * 0.5, candidate.id


def test_render_is_deterministic(terminal_bench):
    candidate = terminal_bench[7]
    first = render_candidate(candidate, 3000)
    assert render_candidate(copy.deepcopy(candidate), 3000) == first
    assert render_candidate(candidate, 3000) == first


def test_long_trajectory_keeps_first_last_and_error_steps_with_markers():
    run = _long_run()
    text = render_candidate(run, 2000)
    assert estimate_tokens(text) <= 2000
    shown = [int(n) for n in _HEADER.findall(text)]
    assert shown[0] == 1 and shown[-3:] == [298, 299, 300]
    assert 121 in shown  # the failing step, in the middle
    assert 60 not in shown and 200 not in shown
    assert "[output, exit code 1]\nTraceback" in text
    assert "[... " in text and "steps elided (steps 2–" in text
    _assert_steps_accounted(text, 300)
    assert text.rstrip().endswith("All tests pass now.")


def test_short_trajectory_is_rendered_whole_without_markers():
    steps = [Step(role="agent", text="Look.", tool_calls=[{"name": "bash", "arguments": {"keystrokes": "ls\n"}}],
                  observation="a.txt", exit_code=0),
             Step(role="agent", text="Done, a.txt exists.")]
    text = render_candidate(Candidate(id="c", trajectory=Trajectory(steps=steps, final_output="Done, a.txt exists.")), 500)
    assert text == "[step 1] agent\nLook.\n$ ls\n[output, exit code 0]\na.txt\n\n[step 2] agent\nDone, a.txt exists."


def test_huge_observation_keeps_head_and_tail_and_counts_the_cut():
    observation = "HEAD-START\n" + "x" * 1_000_000 + "\nTAIL-END"
    run = Candidate(id="big", trajectory=Trajectory(steps=[Step(role="agent", text="cat big.log", observation=observation)]))
    text = render_candidate(run, 2000)
    assert estimate_tokens(text) <= 2000
    assert estimate_tokens(text) > 1500  # one step may use nearly all of the budget
    assert "HEAD-START" in text and text.endswith("TAIL-END")
    marker = re.search(r"\n\[\.\.\. ([\d,]+) characters elided \.\.\.\]\n", text)
    elided = int(marker.group(1).replace(",", ""))
    kept = len(text.split("[output]\n", 1)[1]) - len(marker.group(0))
    assert kept + elided == len(observation)


def test_injected_counter_is_respected_and_work_stays_linear():
    run = _long_run(n_steps=400, obs_chars=2500)  # about 1M characters
    total = sum(len(s.observation) + len(s.text) for s in run.trajectory.steps)
    assert total > 1_000_000
    counted_chars = 0

    def char_counter(text: str) -> int:  # a "tokenizer" with one token per character
        nonlocal counted_chars
        counted_chars += len(text)
        return len(text)

    text = render_candidate(run, 4000, count_tokens=char_counter)
    assert len(text) <= 4000
    assert "[step 400]" in text
    # Each step is cut before it is counted: the counter never sees the trajectory many times over.
    assert counted_chars < 2 * total


def test_word_counter_budget_is_respected():
    run = _long_run(n_steps=50)
    words = lambda s: len(s.split())  # noqa: E731
    for budget in (100, 800, 5000):
        assert words(render_candidate(run, budget, count_tokens=words)) <= budget


def test_text_only_candidate_and_task_truncate_in_the_middle():
    answer = "BEGIN " + "word " * 5000 + " END"
    text = render_candidate(Candidate(id="a", text=answer), 300)
    assert text.startswith("BEGIN") and text.endswith("END") and estimate_tokens(text) <= 300
    task = Task(text="Do this. " + "detail " * 3000 + "Deliver report.md.")
    rendered = render_task(task, 200)
    assert rendered.startswith("Do this.") and rendered.endswith("Deliver report.md.")
    assert estimate_tokens(rendered) <= 200
    assert render_task(Task("  Short task.\n")) == "Short task."


def test_render_run_puts_the_task_first_and_fits(terminal_bench):
    candidate = terminal_bench[0]
    text = render_run(candidate.task, candidate, 3000)
    assert text.startswith("## Task\nYour task is to implement an adaptive-rejection sampler")
    assert "\n## Run\n[step 1] agent" in text
    assert estimate_tokens(text) <= 3000


def test_tiny_budget_is_a_user_error():
    with pytest.raises(UserError, match="too small"):
        render_candidate(_long_run(5), 10)
    assert estimate_tokens(render_candidate(_long_run(5), 48)) <= 48


def test_error_signals():
    assert has_error_signal(Step(role="agent", exit_code=2))
    assert has_error_signal(Step(role="agent", observation="bash: g++: command not found"))
    assert has_error_signal(Step(role="agent", observation="1 FAILED, 3 passed"))
    assert not has_error_signal(Step(role="agent", text="fix the error", observation="ok", exit_code=0))


def test_truncate_middle_leaves_fitting_text_alone():
    assert truncate_middle("short", 10) == "short"
    cut = truncate_middle("a" * 400 + "b" * 400, 50)
    assert cut.startswith("a") and cut.endswith("b") and estimate_tokens(cut) <= 50


def test_command_already_in_the_message_is_not_repeated():
    step = Step(role="agent", text="THOUGHT: list files.\n\n```bash\nls -la\n```",
                tool_calls=[{"name": "bash", "arguments": {"command": "ls -la"}}], observation="a.txt")
    text = render_candidate(Candidate(id="m", trajectory=Trajectory(steps=[step])), 200)
    assert "$ ls -la" not in text and "```bash\nls -la\n```" in text


def test_a_counter_that_calls_a_huge_line_one_token_still_gets_a_bounded_cut():
    """A whitespace-word counter calls a 2 MB line of one character a single token: the cut is still
    bounded by the budget, and no part of the text is shown twice (once a negative elided count)."""
    words = lambda s: len(s.split())  # noqa: E731
    line = "a" * (1 << 20) + "b" * (1 << 20)
    cut = truncate_middle(line, 500, words)
    assert len(cut) <= 500 * 16 + 64 and cut.startswith("a") and cut.endswith("b")
    assert "-" not in cut.split("characters elided")[0].rsplit("[...", 1)[1]
    assert cut.count("a") + cut.count("b") < len(line)
    rendered = render_candidate(Candidate(id="big", text=line), 500, count_tokens=words)
    assert len(rendered) <= 500 * 16 + 64
