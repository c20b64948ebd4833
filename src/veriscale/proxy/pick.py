"""The proxy's early pick: score each candidate as it arrives, compare the top two only when close.

    pick = EarlyPick(verifier, task_text, n=3, margin=0.1)
    await pools.fan_out(conv, run_id, on_arrival=pick.arrive)   # scoring starts while others generate
    record = await pick.result()     # {"method": "early", "ranking", "reason", "usage", "winner", ...}

**The schedule** (:class:`EarlySchedule`, pure logic, no model):

1. Nothing is judged until two valid candidates that are *different actions* (``agreeing``'s
   canonical form) have arrived; candidates that agree with one already seen share its score.
   So agreeing candidates and a single valid one cost no verifier call.
2. From then on each distinct candidate is scored pointwise the moment it arrives (one call
   under joint scoring, C calls under separate scoring), concurrently with the generation still
   running.
   A reply cut at ``max_tokens`` is not scored on arrival: it cannot win while any candidate
   finished, so the scores (and the budget) go to the finished ones, and the pick starts once two
   finished distinct candidates arrived. Cut replies are scored only when every candidate was cut,
   once all arrived; one finished candidate among cut ones needs no verifier call at all.
3. When every candidate arrived (or failed), the scored ones are ranked by pointwise reward.
   If the best beats the runner-up by at least ``margin`` (reward units in [0, 1], default
   :data:`CLOSE_MARGIN` = 0.1, ``[proxy] margin``), it wins. Otherwise the two are compared
   pairwise in both slot orders (2 calls joint, 4·C separate) and P(best ≻ runner-up) decides.

At N = 3 with joint scoring that is at most 3 + 2 = 5 verifier calls (separate scoring with
C = 3: at most 9 + 12 = 21, a comparison being 2 slot orders x 2 slots x 3 criteria). The injection policy applies to the
ranking: ``exclude`` ranks suspects after every clean candidate, ``lose_ties`` makes a suspect
lose an equal reward. Before either, a reply cut at ``max_tokens`` ranks after every reply that
finished (unscored, so it loses without a comparison).

Under ``[proxy] budget`` (``purse``: a :class:`~veriscale.proxy.budget_plan.Purse`) each score
and the comparison is priced before it starts, in arrival order, and starts only when the purse
pays for it: a score that does not fit leaves that candidate unscored (ranked after the scored
ones), a comparison that does not fit in both slot orders is tried in one, and when neither fits
the pointwise leader wins. The purse's steps are the run's ``budget`` record.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from collections.abc import Callable, Coroutine
from typing import Any

from veriscale.errors import ModelCallError
from veriscale.proxy.budget_plan import Purse, compare_cost, score_cost
from veriscale.proxy.fan_out import Sampled, canonical_form
from veriscale.proxy.conversation import reply_text

CLOSE_MARGIN = 0.1  # a pointwise lead below this is "close": the top two are compared pairwise


@dataclass
class EarlySchedule:
    """What to judge next, from arrivals and rewards alone (no model, no clock).

        s = EarlySchedule(n=3)
        s.arrive(a)            # [] (one distinct candidate: nothing to compare yet)
        s.arrive(b)            # [a.index, b.index]: score both now
        s.arrive(c)            # [c.index] (or [] when c agrees with a or b, or was cut at max_tokens)
        s.done                 # True once n candidates arrived
        s.late()               # once done: the cut keys, when every reply was cut (else [])
        s.scored(a.index, 0.8); ...
        s.decide()             # ("pick", key) or ("compare", best, runner_up)
    """

    n: int
    margin: float = CLOSE_MARGIN
    policy: str = "none"
    arrived: list[Sampled] = field(default_factory=list)
    keys: list[int] = field(default_factory=list)  # one key (the first index) per distinct action, arrival order
    rewards: dict[int, float] = field(default_factory=dict)
    suspects: set[int] = field(default_factory=set)
    finished: set[int] = field(default_factory=set)  # keys with a reply that ended before max_tokens
    asked: list[int] = field(default_factory=list)  # keys whose score was asked for, in that order
    _forms: dict[str, int] = field(default_factory=dict)
    _key_of: dict[int, int] = field(default_factory=dict)

    @property
    def done(self) -> bool:
        return len(self.arrived) >= self.n

    @property
    def judging(self) -> bool:
        """Whether there is a choice to judge: two different finished actions, or two different
        actions when every reply was cut."""
        return len([k for k in self.keys if not self.cut(k)]) >= 2

    def key_of(self, index: int) -> int:
        """The distinct action candidate ``index`` belongs to (its first arrival's index)."""
        return self._key_of[index]

    def arrive(self, s: Sampled) -> list[int]:
        """Record one arrival; the keys to score now."""
        self.arrived.append(s)
        if s.reply is None:
            return []
        form = canonical_form(s.reply)
        key = self._forms.get(form, s.index)
        if not s.reply.truncated:
            self.finished.add(key)
        if form not in self._forms:
            self._forms[form] = s.index
            self.keys.append(s.index)
        self._key_of[s.index] = key
        ready = [k for k in self.keys if k in self.finished]
        return self._ask(ready) if len(ready) >= 2 else []

    def late(self) -> list[int]:
        """Once every candidate arrived, the keys still to score: every one when every reply was cut
        at max_tokens (the rewards decide among them), else none."""
        return [] if self.finished or not self.judging else self._ask(self.keys)

    def _ask(self, keys: list[int]) -> list[int]:
        new = [k for k in keys if k not in self.asked]
        self.asked.extend(new)
        return new

    def scored(self, key: int, reward: float, suspected: bool = False) -> None:
        self.rewards[key] = reward
        if suspected:
            self.suspects.add(key)

    def cut(self, key: int) -> bool:
        """Whether ``key`` is ranked as unfinished: its replies stopped at max_tokens while another
        key's reply finished (when every reply was cut, none is held back)."""
        return bool(self.finished) and key not in self.finished

    def ranked(self) -> list[int]:
        """Distinct keys, best first: finished before cut at max_tokens, then by the injection policy,
        then reward, then arrival; keys left unscored (a budget did not pay for them) come last, in
        arrival order."""
        def order(key: int) -> tuple:
            suspect = key in self.suspects
            return (self.cut(key), suspect if self.policy == "exclude" else False, -self.rewards[key],
                    suspect if self.policy == "lose_ties" else False, self.keys.index(key))
        unscored = [k for k in self.keys if k not in self.rewards]
        return sorted(self.rewards, key=order) + sorted(unscored, key=lambda k: (self.cut(k), self.keys.index(k)))

    def decide(self) -> tuple[str, int] | tuple[str, int, int]:
        """``("pick", key)`` when the pointwise lead is clear (or one key alone was scored), else
        ``("compare", best, runner_up)``."""
        scored = [k for k in self.ranked() if k in self.rewards]
        if len(scored) == 1:
            return ("pick", scored[0])
        best, runner_up = scored[:2]
        if self.policy == "exclude" and (best in self.suspects) != (runner_up in self.suspects):
            return ("pick", best)  # a clean candidate beats an excluded one whatever the rewards
        if self.rewards[best] - self.rewards[runner_up] >= self.margin:
            return ("pick", best)
        return ("compare", best, runner_up)


class EarlyPick:
    """Runs an :class:`EarlySchedule` with a Verifier, on the caller's event loop."""

    def __init__(self, verifier: Any, task: str, n: int, *, margin: float = CLOSE_MARGIN,
                 policy: str = "none", spawn: Callable[[Coroutine[Any, Any, Any]], asyncio.Task] = asyncio.ensure_future,
                 purse: Purse | None = None) -> None:
        """``verifier``: a Verifier, or a function that builds one (called at the first score only,
        so agreeing requests never build one). ``spawn`` starts each score as a task (the request's
        ``RequestScope.start``, so leaving the request stops the scores in flight too). ``purse``:
        the request's budget, which pays for each score and the comparison before it starts."""
        self._verifier = verifier
        self.purse = purse
        self._paying = asyncio.Lock()  # scores are priced and paid one at a time, in arrival order
        self.budget_stop = "plan complete"
        self.compare_orders = "both slot orders"
        self._spawn = spawn
        self.task = task
        self.schedule = EarlySchedule(n=n, margin=margin, policy=policy)
        self.events: list[dict[str, Any]] = []
        self._scores: dict[int, asyncio.Task] = {}
        self._results: dict[int, Any] = {}
        self._all_arrived = asyncio.Event()
        self._t0 = time.perf_counter()
        self.last_arrival_s: float | None = None

    @property
    def verifier(self) -> Any:
        if callable(self._verifier) and not hasattr(self._verifier, "ascore"):
            self._verifier = self._verifier()
        return self._verifier

    @property
    def usage(self) -> dict[str, Any] | None:
        """The verifier's usage so far (None: no verifier was needed)."""
        return None if callable(self._verifier) and not hasattr(self._verifier, "ascore") else \
            self._verifier.usage.to_dict()

    def _event(self, what: str, index: int | None = None) -> None:
        self.events.append({"event": what, "index": index, "t_s": round(time.perf_counter() - self._t0, 4)})

    def arrive(self, s: Sampled) -> None:
        """One candidate came back (or failed): score what the schedule says, now, in the background."""
        self._event("arrived" if s.reply is not None else "failed", s.index)
        for key in self.schedule.arrive(s):
            self._event("score started", key)
            self._scores[key] = self._spawn(self._score(key, s if key == s.index else self._sampled(key)))
        if self.schedule.done:
            self.last_arrival_s = time.perf_counter() - self._t0
            self._all_arrived.set()

    def _sampled(self, index: int) -> Sampled:
        return next(a for a in self.schedule.arrived if a.index == index)

    async def _score(self, key: int, s: Sampled) -> Any:
        text = reply_text(s.reply)
        if self.purse is not None:
            async with self._paying:  # priced off the loop (a server may count the tokens), paid in order
                if not await asyncio.to_thread(self._pay_score, key, text):
                    self._event("score skipped", key)
                    return None
        result = await self.verifier.ascore(self.task, text)
        self._event("score done", key)
        return result

    def _pay_score(self, key: int, text: str) -> bool:
        n = len(self.verifier.criteria.items)
        first = key in self.schedule.asked[:2]
        paid = self.purse.pay(score_cost(self.verifier, self.task, text), "score",
                              f"candidate {key} scored pointwise on {n} criteri{'on' if n == 1 else 'a'}",
                              "two different finished actions arrived" if first else
                              "a further different finished action arrived")
        if not paid:
            self.budget_stop = "budget spent"
        return paid

    def _pay_compare(self, best: int, runner_up: int, a: str, b: str) -> int | None | bool:
        """Pay for comparing the top two: None (both slot orders), 0 (the first alone) or False (neither)."""
        why = f"the pointwise lead of {best} over {runner_up} is below the margin {self.schedule.margin:g}"
        cost, only = compare_cost(self.verifier, self.task, a, b), None
        if not self.purse.fits(cost):
            cost, only = compare_cost(self.verifier, self.task, a, b, 0), 0  # the least a comparison takes
            if self.purse.fits(cost):
                why += "; both slot orders do not fit, so one is judged"
        self.compare_orders = "both slot orders" if only is None else "one slot order"
        if not self.purse.pay(cost, "compare", f"{best} vs {runner_up} compared in {self.compare_orders}", why):
            self.budget_stop = "budget spent"
            return False
        return only

    async def _compare(self, best: int, runner_up: int) -> Any:
        """The pairwise comparison of the top two; None when the purse pays for neither slot order."""
        a, b = reply_text(self._sampled(best).reply), reply_text(self._sampled(runner_up).reply)
        only = None
        if self.purse is not None:
            only = await asyncio.to_thread(self._pay_compare, best, runner_up, a, b)
            if only is False:
                return None
        self._event("compare started", best)
        pair = await self.verifier.acompare(self.task, a, b, only_repeat=only)
        self._event("compare done", best)
        return pair

    def cancel(self) -> None:
        """Stop every score still running (the request was given up)."""
        for task in self._scores.values():
            task.cancel()

    async def result(self) -> dict[str, Any] | None:
        """The pick once every candidate arrived; None when nothing needed judging (agreement, one valid,
        one finished)."""
        try:
            await self._all_arrived.wait()
            if not self.schedule.judging:
                return None
            for key in self.schedule.late():  # every reply was cut: the rewards decide among them
                self._event("score started", key)
                self._scores[key] = self._spawn(self._score(key, self._sampled(key)))
            for key, task in self._scores.items():
                result = await task
                if result is None:  # the budget did not pay for this score
                    continue
                if result.failed or result.reward is None:
                    raise ModelCallError(f"scoring candidate {key} failed: {'; '.join(result.errors) or 'no reward'}")
                self._results[key] = result
                self.schedule.scored(key, result.reward, bool(result.injection_suspected))
            if not self.schedule.rewards:
                raise ModelCallError(f"the budget {self.purse.budget if self.purse else ''} paid for no score: "
                                     "raise [proxy] budget")
            decision = self.schedule.decide()
            pair = None
            if decision[0] == "compare":
                _, best, runner_up = decision
                pair = await self._compare(best, runner_up)
                if pair is None:  # the budget did not pay for it: the pointwise leader wins
                    winner = best
                elif pair.failed or pair.p_a_wins is None:
                    raise ModelCallError(f"comparing candidates {best} and {runner_up} failed: "
                                         f"{'; '.join(pair.errors) or 'no verdict'}")
                else:
                    winner = best if pair.p_a_wins >= 0.5 else runner_up
            else:
                winner = decision[1]
            return self._record(winner, decision, pair)
        finally:
            self.cancel()

    def _record(self, winner: int, decision: tuple, pair: Any) -> dict[str, Any]:
        """The selection-shaped record the run and the dashboard's selection page read; every index in it
        (``index``, ``ranking``, the comparison's ``i`` and ``j``) is the candidate's number among the N
        asked for, as in the run's ``candidates`` (a failed one keeps its number and is left out)."""
        s = self.schedule
        valid = sorted((a for a in s.arrived if a.reply is not None), key=lambda a: a.index)
        ranked = s.ranked()
        rank_of = {key: r for r, key in enumerate(ranked)}
        ranking = sorted(valid, key=lambda a: (rank_of[s.key_of(a.index)], a.index))
        comparisons, orders = [], self.compare_orders
        if pair is not None:
            best, runner_up = decision[1], decision[2]
            comparisons.append({"i": best, "j": runner_up, "p": pair.p_a_wins, "orders": orders})
        scored = [k for k in ranked if k in s.rewards]
        lead = s.rewards[scored[0]] - s.rewards[scored[1]] if len(scored) > 1 else 0.0
        if len(scored) == 1:
            reason = f"candidate {winner} was the only one the budget paid a score for, so it won unrivalled"
        elif pair is None and decision[0] == "compare":
            reason = (f"the pointwise lead was {lead:.3f} (< margin {s.margin:g}) but the budget did not pay for "
                      f"the comparison, so the pointwise leader, candidate {winner}, won")
        elif pair is None:
            reason = (f"candidate {winner} led the pointwise rewards by {lead:.3f} (≥ margin {s.margin:g}), "
                      "so no pairwise comparison ran")
        else:
            reason = (f"the pointwise lead was {lead:.3f} (< margin {s.margin:g}): the top two were compared in "
                      f"{orders} and candidate {winner} won (P = "
                      f"{pair.p_a_wins if winner == decision[1] else 1 - pair.p_a_wins:.3f})")
        return {
            "method": "early", "schedule": "early", "winner": winner, "index": winner,
            "best": {"id": f"candidate-{winner}"}, "decided": True,
            "confidence": None if pair is None else max(pair.p_a_wins, 1 - pair.p_a_wins),
            "reason": {"text": reason}, "margin": s.margin, "pointwise_lead": round(lead, 4),
            "ranking": [{"rank": r + 1, "index": a.index, "id": f"candidate-{a.index}",
                         "score": s.rewards.get(s.key_of(a.index)),
                         "criteria": self._results[s.key_of(a.index)].criterion_rewards()
                         if s.key_of(a.index) in self._results else {},
                         "injection_suspected": s.key_of(a.index) in s.suspects}
                        for r, a in enumerate(ranking)],
            "tournament": {"comparisons": comparisons},
            "pairwise": None if pair is None else {"p_a_wins": pair.p_a_wins, "reward_a": pair.reward_a,
                                                   "reward_b": pair.reward_b, "slot_orders": pair.slot_orders,
                                                   "position_bias": pair.position_bias},
            "usage": self.usage, "events": list(self.events),
            "notes": [n for res in self._results.values() for n in res.notes] + ([] if pair is None else pair.notes),
        }
