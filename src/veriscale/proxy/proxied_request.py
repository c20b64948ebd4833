"""One proxied request, whatever API it came in: fan out, agree or pick, record, track.

    service = ProxyService(pools, verifier_backend, settings, store)
    outcome = await service.answer(conversation, api="anthropic")
    outcome.reply, outcome.how      # the winner; "agreed" | "verified" | "verification failed" | "only one valid"
                                    # | "only one complete"

A reply cut at ``max_tokens`` is unfinished: while any candidate finished, the cut ones are left
out of the agreement and the pick (:func:`~veriscale.proxy.pick_outcome.complete_first`) and the run
records them as ``cut``.

The pick's schedule is ``[proxy] schedule`` (``ProxySettings.schedule_now``): ``early`` hands
each candidate to :class:`~veriscale.proxy.pick.EarlyPick` as it arrives, so pointwise scoring
runs while the slowest candidate is still generating; ``round_robin`` waits for all N and runs
every pair (3 pairs x 2 slot orders x C criteria at N = 3). ``verify_after_last_s`` records what
the pick added after the slowest candidate; ``proxy.timeout_s`` bounds that part, as before.
Under ``[proxy] budget`` the pick plans inside it (:mod:`veriscale.proxy.budget_plan`: the
schedule and criteria it affords; round robin becomes the cost controller) and the run records
what it spent and why (``budget``: the plan, each step paid or skipped, spent and left).
    service.track_later(conversation, outcome)   # progress of the agent's conversation, after the reply

Every request is a store run (command ``proxy <api>``): its candidates (failed ones with their
error), the pick and why, the selection when one ran (so the dashboard shows its matrix), the
latency each part added and the cost. When verification fails the first valid candidate is
returned and the failure is recorded and shown, never hidden. When every candidate failed,
:class:`UpstreamFailed` says why and the front API answers in its own error shape.

**Numbers**: a candidate's number is its place among the N the request asked for (``candidate-i``,
seed base + i); a failed one keeps its number. The run's ``candidates``, ``winner``, ``index``,
``ranking`` and tournament all use it (:func:`~veriscale.proxy.pick_outcome.numbered`), so the dashboard and ``runs show`` name
each candidate one way. The reply's input token count is the valid candidate's with the lowest
number, known before the pick (an Anthropic stream's ``message_start`` carries it, the same as the
reply that is not streamed); its output token count is the winner's.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Callable

from veriscale.data.model import Candidate, Step, Task
from veriscale.engine.run_log import RunLog
from veriscale.engine.run_scope import RunHandle, open_run, recorded_run
from veriscale.engine.store import Store
from veriscale.errors import ModelCallError
from veriscale.proxy.fan_out import Sampled, UpstreamPools, agreeing
from veriscale.proxy.conversation import Conversation, Reply, content_text, recorded_conversation, reply_text, transcript
from veriscale.proxy.budget_plan import PickPlan, Purse, plan_pick
from veriscale.proxy.pick import EarlyPick
from veriscale.proxy.pick_outcome import complete_first, numbered, pick_reason
from veriscale.proxy.request_scope import RequestScope
from veriscale.proxy.settings import ProxySettings
from veriscale.engine.store_writer import landed

MAX_TRACKED_CONVERSATIONS = 64


class UpstreamFailed(ModelCallError):
    """No candidate came back: the front answers with its API's error (502)."""


@dataclass
class Outcome:
    reply: Reply
    run_id: int
    how: str
    winner: int
    candidates: list[Sampled]
    error: str | None = None


class ProxyService:
    def __init__(self, pools: UpstreamPools, verifier_model: Any, settings: ProxySettings, store: Store) -> None:
        self.pools = pools
        self.verifier_model = verifier_model
        self.settings = settings
        self.store = store
        self.log = RunLog(store)
        self._trackers: OrderedDict[str, Any] = OrderedDict()
        self._track_lock = threading.Lock()

    async def answer(self, conv: Conversation, api: str,
                     on_first: Callable[[Sampled], None] | None = None) -> Outcome:
        """The picked reply; ``on_first(sampled)``: on this loop, as soon as it is known, the valid candidate
        with the lowest number, whose input token count the reply reports (see **Numbers**)."""
        started = time.perf_counter()
        models = self.pools.models_for(conv)  # the pool conv.model names ([proxy.aliases])
        with recorded_run(self.store, f"proxy {api}", models[0], {  # ~0.1 ms: not worth a thread hop
                "api": api, "model": conv.model, "n": len(models), "stream": conv.stream,
                "messages": len(conv.messages), "tools": [t.get("function", {}).get("name") for t in conv.tools]}) as run:
            try:
                return await self._answer(conv, api, run, started, on_first)  # the run is current: its calls link to it
            except (asyncio.CancelledError, GeneratorExit) as exc:  # the client went away: its work has stopped by now
                if isinstance(exc, asyncio.CancelledError):  # a closed coroutine (GeneratorExit) can await nothing
                    await self._landed()
                run.finish("cancelled", {"api": api, "error": "the client disconnected before the reply; the upstream "
                                         "and verifier calls in flight were cancelled"})
                raise

    async def aclose(self) -> None:
        """Close the upstream backends the proxy opened (the app's lifespan calls this at shutdown); the
        verifier's backend belongs to whoever handed it over."""
        await self.pools.aclose()

    def verifier(self) -> Any:
        """The pick's Verifier on the proxy's criteria and injection settings."""
        from veriscale.verify.reward import Verifier

        return Verifier(self.verifier_model, store=self.store, criteria=self.settings.criteria,
                        **{k: v for k, v in self.settings.injection.items() if k != "injection_policy"})

    def _plan(self, n: int) -> PickPlan | None:
        """How a pick of ``n`` candidates spends ``[proxy] budget`` (None: no budget, or one candidate)."""
        from veriscale.verify.joint import joint_default

        if self.settings.budget is None or n < 2:
            return None
        return plan_pick(self.settings, self.verifier(), n, joint_default())

    def _early(self, conv: Conversation, n: int, scope: RequestScope, plan: PickPlan | None,
               run_id: int) -> EarlyPick | None:
        """The arrival-driven pick of ``n`` candidates when the schedule is early (``veriscale.proxy.pick``), else None."""
        from veriscale.verify.joint import joint_default

        schedule = plan.schedule if plan is not None else self.settings.schedule_now(joint_default(), n)
        if n < 2 or schedule != "early":
            return None
        purse = None
        if plan is not None:
            purse = Purse(plan.budget, on_step=lambda step: self.log.emit(run_id, "budget", step))

        def verifier() -> Any:  # built at the first score: an agreeing request never needs one
            return self.verifier() if plan is None else self.verifier().with_first_criteria(plan.criteria)

        return EarlyPick(verifier, transcript(conv), n, margin=self.settings.margin,
                         policy=self.settings.injection.get("injection_policy", "none"), spawn=scope.start,
                         purse=purse)

    async def _answer(self, conv: Conversation, api: str, run: RunHandle, started: float,
                      on_first: Callable[[Sampled], None] | None = None) -> Outcome:
        gave_up = False
        async with RequestScope() as scope:  # leaving it any way stops every piece of the request's work
            n = len(self.pools.models_for(conv))
            plan = None if self.settings.budget is None else \
                await asyncio.to_thread(self._plan, n)  # the verifier may count tokens on its server
            early = self._early(conv, n, scope, plan, run.id)
            picking = None if early is None else scope.start(early.result())  # links to the run: same context
            results = await self.pools.fan_out(conv, run.id, on_arrival=_arrivals(early, on_first, n))
            sampled_s = time.perf_counter() - started
            valid = [r for r in results if r.reply is not None]
            complete, cut = complete_first(valid)
            how, winner, error, selection = "agreed", complete[0] if complete else None, None, None
            if not valid:
                how = "every candidate failed"
            elif len(results) == 1:
                how = "single candidate"
            elif len(valid) == 1:
                how = "only one valid"
            elif len(complete) == 1:
                how = "only one complete"
            elif not agreeing(complete):
                try:  # a task of the scope inherits this context, so the pick's calls link to the request's run
                    if picking is None:  # round robin: awaited on this loop, stopped with the scope
                        picking = scope.start(self._select(conv, complete, len(results), run.id,
                                                           None if plan is None else plan.budget))
                    selection = await scope.within(picking, self.settings.timeout_s)  # early: scoring already
                    winner = next(r for r in valid if r.index == selection["index"])
                    how = "verified"
                except asyncio.TimeoutError:  # the [proxy] timeout_s bounds the verification too
                    gave_up = True
                    how, error = "verification failed", (f"the verification passed its {self.settings.timeout_s:g} s "
                                                         "timeout (proxy.timeout_s); its calls in flight were cancelled")
                except Exception as exc:  # noqa: BLE001 - the agent still gets an answer; the failure is shown
                    how, error = "verification failed", f"{type(exc).__name__}: {exc}" if not isinstance(
                        exc, ModelCallError) else str(exc)
        # nothing this request started still runs: its calls are recorded (the stopped ones cancelled)
        await self._landed()
        record: dict[str, Any] = {"api": api, "candidates": [r.to_dict() for r in results], "sample_s": round(sampled_s, 4),
                                  "schedule": "round_robin" if early is None else "early",
                                  "conversation": recorded_conversation(conv)}  # the dashboard's request page
        if winner is None:
            errors = "; ".join(sorted({r.error or "no reply" for r in results}))[:500]
            record.update(how=how, error=errors, latency_s=round(sampled_s, 4))
            run.finish("failed", record)
            raise UpstreamFailed(f"every upstream candidate failed: {errors}")
        total = time.perf_counter() - started
        record.update(how=how, winner=winner.index, error=error, latency_s=round(total, 4),
                      verify_s=round(total - sampled_s, 4), reason=pick_reason(how, selection, error, cut))
        if cut:
            record["cut"] = cut
        if how in ("verified", "verification failed"):  # what the pick added after the slowest candidate
            record["verify_after_last_s"] = round(total - sampled_s, 4)
        if early is not None and how == "verification failed":
            record["usage"] = early.usage  # the calls it made before it failed or was cut
            record["events"] = list(early.events)
        if plan is not None and how in ("verified", "verification failed"):  # what the budget paid for, and why
            record["budget"] = early.purse.to_dict(plan, early.budget_stop) if early is not None else \
                {**((selection or {}).get("budget") or await asyncio.to_thread(self._steps_so_far, run.id, plan)),
                 "plan": plan.to_dict()}
        if selection is not None:
            record.update({k: selection[k] for k in ("ranking", "confidence", "reason", "tournament", "method",
                                                     "usage", "best", "decided", "notes", "injection",
                                                     "injection_suspected", "events", "margin", "pointwise_lead",
                                                     "pairwise") if k in selection})
            record["index"] = winner.index
            record["reason"] = pick_reason(how, selection, error, cut)
        run.finish("cancelled" if gave_up else "ok", record)  # a give-up is a cancel: the first valid reply went
        sent = dataclasses.replace(winner.reply, prompt_tokens=valid[0].reply.prompt_tokens)  # see **Numbers**
        return Outcome(sent, run.id, how, winner.index, results, error)

    def _steps_so_far(self, run_id: int, plan: PickPlan) -> dict[str, Any]:
        """The controller's steps a failed pick took, from the run's ``budget`` events."""
        steps = [e.data for e in self.log.since(run_id) if e.kind == "budget"]
        return {"budget": str(plan.budget), "stop_reason": "verification failed", "steps": steps}

    async def _landed(self) -> None:
        """Wait until the call records handed to the store's writer so far have landed (before the run ends)."""
        await landed(self.store.submit(lambda: None))

    async def _select(self, conv: Conversation, valid: list[Sampled], n: int, run_id: int,
                      budget: Any = None) -> dict[str, Any]:
        """The round-robin (or PPT) pick, numbered as the request's N candidates (:func:`numbered`):
        planned in a worker thread (it may count tokens on the verifier's server), then every judge
        call awaited on this loop, so cancelling the task cancels them. With ``budget`` it is the
        cost controller, each step recorded on the run as it is taken."""
        from veriscale.selection.select import arun_selection

        plan, verifier = await asyncio.to_thread(self._selection_plan, conv, valid, budget)
        selection = await arun_selection(plan, verifier=verifier,
                                         on_step=lambda step: self.log.emit(run_id, "budget", step))
        return numbered(selection.to_dict(), [r.index for r in valid], n)

    def _selection_plan(self, conv: Conversation, valid: list[Sampled], budget: Any) -> tuple[Any, Any]:
        """The pick's verifier and plan (blocking: rendering counts tokens)."""
        from veriscale.selection.select import plan_selection
        from veriscale.selection.settings import SelectionSettings

        # every pair in both slot orders is cheaper than PPT's ring plus pivots, and shows position bias
        few = len(valid) <= 3 and budget is None
        settings = SelectionSettings(method="round_robin" if few else "ppt", repeats=2 if few else None,
                                     k=min(self.settings.k, len(valid) - 1) or 1, criteria=self.settings.criteria,
                                     adaptive=True, budget=budget, **self.settings.injection)
        verifier = settings.verifier(self.verifier_model, store=self.store)  # links to the current run
        candidates = [Candidate(id=f"candidate-{r.index}", text=reply_text(r.reply), metadata={"model": r.model})
                      for r in valid]
        plan = plan_selection(Task(text=transcript(conv), id="proxy"), candidates, verifier=verifier, settings=settings)
        return plan, verifier

    # -- progress of the agent's conversation, after the reply ---------------------------------
    def track_later(self, conv: Conversation, outcome: Outcome) -> None:
        """Score the conversation's progress in a background thread (never before the reply)."""
        if self.settings.progress:
            threading.Thread(target=self._track, args=(conv, outcome), daemon=True, name="proxy-progress").start()

    def _track(self, conv: Conversation, outcome: Outcome) -> None:
        from veriscale.progress.progress_judge import ProgressJudge
        from veriscale.progress.tracker import ProgressTracker

        steps = _steps(conv, outcome.reply)
        if not steps:
            return
        key = _conversation_key(conv)
        with self._track_lock:  # one conversation at a time: the judge's prefix cache follows it
            entry = self._trackers.get(key)
            if entry is None:  # a conversation's run outlives each request: open until it is evicted
                run = open_run(self.store, "proxy conversation", getattr(self.verifier_model, "uri", None),
                               {"conversation": key})
                judge = ProgressJudge(self.verifier_model, store=self.store)
                entry = {"tracker": ProgressTracker(_task(conv), judge=judge), "run": run, "seen": 0}
                self._trackers[key] = entry
                while len(self._trackers) > MAX_TRACKED_CONVERSATIONS:
                    _, old = self._trackers.popitem(last=False)
                    old["run"].finish("ok", {"curves": [old["tracker"].curve.to_dict()]})
            self._trackers.move_to_end(key)
            tracker, run = entry["tracker"], entry["run"]
            run_id = run.id
            with run.current():  # the judge's calls link to the conversation's run
                for step in steps[entry["seen"]:]:
                    try:
                        point = tracker.update(step)
                    except Exception as exc:  # noqa: BLE001 - tracking is advisory; the reply already went
                        self.log.emit(run_id, "status", {"status": "tracking failed", "error": str(exc)})
                        return
                    self.log.record_steps(run_id, key, [step])
                    self.log.emit(run_id, "point", {"trajectory": key, "point": point.to_dict(), "voc": tracker.curve.voc})
                    self.log.emit_events(run_id, key, tracker.new_events)
            entry["seen"] = len(steps)


def _arrivals(early: EarlyPick | None, on_first: Callable[[Sampled], None] | None,
              n: int) -> Callable[[Sampled], None] | None:
    """What to call as each candidate arrives: the early pick's arrival, and ``on_first`` once, with the
    valid candidate of the lowest number, as soon as every lower one has failed."""
    if on_first is None:
        return None if early is None else early.arrive
    seen: dict[int, Sampled] = {}
    told = []

    def arrive(s: Sampled) -> None:
        if early is not None:  # first: the pick never waits on what on_first does
            early.arrive(s)
        seen[s.index] = s
        lowest = next((i for i in range(n) if i not in seen or seen[i].reply is not None), None)
        if not told and lowest in seen:  # every lower one failed, and this one came back
            told.append(lowest)
            on_first(seen[lowest])

    return arrive


def _conversation_key(conv: Conversation) -> str:
    first = [m for m in conv.messages if m.get("role") in ("system", "user")][:2]
    blob = "\n".join(content_text(m.get("content")) for m in first)
    return "conv-" + hashlib.sha256(blob.encode()).hexdigest()[:12]


def _task(conv: Conversation) -> str:
    user = next((m for m in conv.messages if m.get("role") == "user"), None)
    return content_text(user.get("content")) if user else "the agent's task"


def _steps(conv: Conversation, reply: Reply) -> list[Step]:
    """The conversation after its first user message, one step a message, and the reply."""
    messages = list(conv.messages)
    first_user = next((i for i, m in enumerate(messages) if m.get("role") == "user"), None)
    if first_user is None:
        return []
    steps = []
    for m in messages[first_user + 1:]:
        role = {"assistant": "agent", "tool": "tool", "user": "user"}.get(m.get("role"), "environment")
        steps.append(Step(role=role, text=content_text(m.get("content")), tool_calls=list(m.get("tool_calls") or [])))
    steps.append(Step(role="agent", text=reply.text, tool_calls=list(reply.tool_calls)))
    return steps
