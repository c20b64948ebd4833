"""What a proxied request's pick chooses among, and how its run describes the choice.

    complete, cut = complete_first(valid)            # finished replies first; the cut ones' numbers
    selection = numbered(selection, [r.index for r in complete], n)   # the request's numbering
    pick_reason("only one complete", None, None, [1])
    # 'only one candidate finished before max_tokens; it was returned unverified (candidate 1 stopped at max_tokens)'
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from veriscale.proxy.fan_out import Sampled


def numbered(selection: dict[str, Any], numbers: list[int], n: int) -> dict[str, Any]:
    """A selection over the valid candidates (indices 0..V-1) in the request's numbering: position k
    becomes ``numbers[k]``, the candidate's index among the ``n`` asked for, in ``index``, the ranking,
    the tournament (comparisons, scores, ties, pivots; strengths and win mass as ``n`` values, None
    for a failed candidate) and the injection suspects."""
    def spread(values: list[Any]) -> list[Any]:
        out: list[Any] = [None] * n
        for k, value in enumerate(values):
            out[numbers[k]] = value
        return out

    sel = {**selection, "index": numbers[selection["index"]],
           "ranking": [{**r, "index": numbers[r["index"]]} for r in selection.get("ranking") or []]}
    t = selection.get("tournament")
    if isinstance(t, dict):
        sel["tournament"] = {
            **t, "winner": numbers[t["winner"]], "ranking": [numbers[i] for i in t.get("ranking") or []],
            "strengths": spread(t.get("strengths") or []), "win_mass": spread(t.get("win_mass") or []),
            "ties": [[numbers[a], numbers[b]] for a, b in t.get("ties") or []],
            "pivots": [numbers[i] for i in t.get("pivots") or []],
            "comparisons": [{**c, "i": numbers[c["i"]], "j": numbers[c["j"]]} for c in t.get("comparisons") or []],
            "scores": [{**sc, "i": numbers[sc["i"]]} for sc in t.get("scores") or []]}
    if isinstance(selection.get("injection"), dict):
        sel["injection"] = {**selection["injection"],
                            "suspects": [numbers[i] for i in selection["injection"].get("suspects") or []]}
    return sel


def complete_first(valid: list[Sampled]) -> tuple[list[Sampled], list[int]]:
    """The candidates the pick chooses among, and the numbers of those it leaves out: a reply cut at
    ``max_tokens`` is unfinished (a client such as Claude Code fails on it), so while any candidate
    finished, the cut ones are left out; when every one was cut, all of them stay.

        complete_first([finished_0, cut_1, finished_2])   # ([finished_0, finished_2], [1])
    """
    complete = [r for r in valid if r.reply is not None and not r.reply.truncated]
    if not complete:
        return list(valid), []
    finished = {r.index for r in complete}
    return complete, [r.index for r in valid if r.index not in finished]


def pick_reason(how: str, selection: dict[str, Any] | None, error: str | None, cut: Sequence[int] = ()) -> str:
    """The run's ``reason``: how the winner was chosen, and which candidates were left out as cut."""
    if how == "verified" and selection is not None:
        why = (selection.get("reason") or {}).get("text") or "picked by the tournament"
    elif how == "verification failed":
        why = f"verification failed ({error}); the first {'complete' if cut else 'valid'} candidate was returned"
    elif how == "only one valid":
        why = "only one candidate came back; it was returned unverified"
    elif how == "only one complete":
        why = "only one candidate finished before max_tokens; it was returned unverified"
    elif how == "single candidate":
        why = "the proxy is set to one candidate (N = 1): nothing to compare"
    else:
        why = "the candidates agreed (same text and tool calls), so no verification ran"
    if cut and how != "only one complete":
        why += f" (among the candidates that finished; {_numbers(cut)} stopped at max_tokens and were left out)"
    elif cut:
        why += f" ({_numbers(cut)} stopped at max_tokens)"
    return why


def _numbers(indices: Sequence[int]) -> str:
    names = [f"candidate {i}" for i in indices]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
