"""The fine-grained verifier: expected label value over G labels, K repeats and C criteria.

    v = Verifier(load_backend("embedded"), store=Store.open())
    s = v.score("Sort numbers.txt", "I ran sort -n numbers.txt > out.txt ...")
    s.reward                      # R = (1/KC) sum_k sum_c E_kc, in [0, 1]
    c = v.compare(task, a, b)
    c.p_a_wins                    # sigmoid((R_a - R_b) / tau)
    s = await v.ascore(task, candidate)     # the same from async code (score/compare wrap these)

A repeat must change something: what repeat r computes (slot order, sampling seed) and when K
collapses (pointwise to 1, pairwise to 2, without sampled reasoning) is the one rule in
``veriscale.verify.repeats``; a collapsed result says so in its notes.
"""

from __future__ import annotations

import asyncio
import copy
import math
from typing import Callable

from veriscale.data.reader import require_utf8
from veriscale.engine.sync_facade import CallExecutor, CallOutcome, Estimate, PlannedCall
from veriscale.engine import sync_edge
from veriscale.engine.store import Store
from veriscale.errors import UserError, setting, worded
from veriscale.models.abilities import AsyncLabelCheck
from veriscale.models.base import ModelBackend
from veriscale.models.read_strategy import first_token_note
from veriscale.models.sampled_read import value_se
from veriscale.verify import injection as injection_signal
from veriscale.verify import joint as joint_scoring
from veriscale.verify.criteria import CriteriaSet, load_criteria
from veriscale.models.vision import require_vision
from veriscale.verify.prompts import PROMPT_VERSION, Images, pairwise_request, pointwise_request
from veriscale.verify.repeats import Repeat, distinct_repeats, repeat
from veriscale.verify.resist import DEFAULT_MITIGATION, check_mitigation
from veriscale.verify.results import CompareResult, Reading, ReadingTag as _Tag, ScoreResult, VerdictBase, mean, summarise_criterion
from veriscale.verify.scale import Scale, parse_scale


def sigmoid(x: float) -> float:
    """The logistic function, as a plain float (no overflow at either end)."""
    x = float(x)
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    z = math.exp(x)
    return z / (1.0 + z)


MAX_CHARS_PER_TOKEN = 128  # more than the longest token of common vocabularies (SmolLM2's: 32 characters)


class Verifier:
    """Scores and compares candidates with one model, scale, criteria set and repeat count."""

    def __init__(self, model: ModelBackend, *, store: Store | None = None,
                 scale: Scale | str = "letters", criteria: CriteriaSet | str = "general",
                 repeats: int | None = None, reasoning: bool = False, discrete: bool = False,
                 seed: int = 0, tau: float | None = None, refresh: bool = False,
                 max_calls: int | None = None, concurrency: int = 4,
                 on_call: Callable[[CallOutcome], None] | None = None,
                 injection_detect: bool | None = None, injection_mitigation: str | None = None,
                 joint: bool | None = None) -> None:
        if repeats is not None and repeats < 1:
            raise UserError(f"{setting('repeats')} {repeats} is not allowed: use 1 or more")
        self.model = model
        self.scale = parse_scale(scale) if isinstance(scale, str) else scale
        self.criteria = load_criteria(criteria) if isinstance(criteria, str) else criteria
        self.repeats = repeats
        self.reasoning = reasoning
        self.discrete = discrete
        self.seed = seed
        #: the injection detector runs on every candidate (None: ``DETECT_BY_DEFAULT``)
        self.injection_detect = injection_signal.DETECT_BY_DEFAULT if injection_detect is None else bool(injection_detect)
        self.injection_mitigation = check_mitigation(injection_mitigation or DEFAULT_MITIGATION)
        self._tau = tau
        self._tau_given = tau is not None
        self._tau_note: str | None = None  # said when tau is the uncalibrated default
        #: one call reads every criterion (``verify.joint``; None: ``joint_default()``, off unless set)
        self.joint = joint_scoring.joint_default() if joint is None else bool(joint)
        self.executor = CallExecutor(model, store, prompt_version=PROMPT_VERSION, refresh=refresh,
                                     max_calls=max_calls, concurrency=concurrency, on_done=on_call)
        self._labels_checked = False

    @property
    def usage(self):
        return self.executor.usage

    def with_scale(self, scale: Scale) -> "Verifier":
        """This verifier on another scale (the same executor: one store, one usage, one call budget);
        its labels are checked again and τ is calibrated for that scale unless it was given."""
        if scale == self.scale:
            return self
        other = copy.copy(self)
        other.scale, other._labels_checked = scale, False
        if not self._tau_given:
            other._tau = None
        return other

    def with_first_criteria(self, n: int) -> "Verifier":
        """This verifier on the first ``n`` of its criteria (the same executor: one store, one usage)."""
        items = self.criteria.items
        if n >= len(items):
            return self
        other = copy.copy(self)
        other.criteria = self.criteria.only([c.name for c in items[:n]])
        return other

    @property
    def tau(self) -> float:
        if self._tau is None:
            from veriscale.verify import calibration  # scipy, only where tau is not given

            self._tau, source = calibration.tau_with_source(self.executor.store, self.executor.calibration_key(),
                                                            self.scale.name, self.discrete,
                                                            calibration.criteria_tag(self.criteria))
            self._tau_note = calibration.default_tau_note(self._tau, self.criteria) if source == "default" else None
        return self._tau

    def image_tokens(self) -> tuple[int, bool]:
        """Prompt tokens one image costs on this model, and whether ``models check`` measured it (its
        probe is cached in the store; else an estimate, ``vision_probe.DEFAULT_IMAGE_TOKENS``)."""
        from veriscale.models.vision_probe import image_token_cost

        return image_token_cost(self.executor.store, self.model)

    def check_labels(self) -> None:
        """Raise a UserError if a label of the scale is not a single token for this model."""
        if not self._labels_checked:
            self._refuse_labels(self.model.single_token_labels(self.scale.labels))

    async def acheck_labels(self) -> None:
        """:meth:`check_labels` without blocking the loop (the backend's async probe, else a thread)."""
        if self._labels_checked:
            return
        bad = (await self.model.asingle_token_labels(self.scale.labels) if isinstance(self.model, AsyncLabelCheck)
               else await asyncio.to_thread(self.model.single_token_labels, self.scale.labels))
        self._refuse_labels(bad)

    def _refuse_labels(self, bad: list[str]) -> None:
        if bad:
            raise UserError(
                f"score labels {', '.join(bad)} of scale '{self.scale.name}' are not single tokens "
                f"for {self.model.display_name}: use {setting('scale', 'letters')} (A-T) or {setting('scale', 'yesno')}"
            )
        self._labels_checked = True

    # -- planning ------------------------------------------------------------------------
    def _repeats_for(self, pairwise: bool) -> int:
        """K as asked; by default 1 pointwise and 2 pairwise (both slot orders)."""
        return self.repeats if self.repeats is not None else (2 if pairwise else 1)

    def _repeats(self, pairwise: bool) -> tuple[list[Repeat], list[str]]:
        asked = self._repeats_for(pairwise)
        repeats = distinct_repeats(asked, pairwise=pairwise, reasoning=self.reasoning, seed=self.seed)
        notes = []
        if len(repeats) < asked:
            notes.append(worded(
                f"K collapsed from {asked} to {len(repeats)}: without sampled reasoning, "
                + ("repeats beyond both slot orders" if pairwise else "a pointwise repeat")
                + f" would recompute the same thing (use {setting('reasoning')} to sample each repeat anew)"
            ))
        return repeats, notes

    def _require_fits(self, texts: dict[str, str]) -> None:
        """Refuse texts that cannot fit the model's context at any tokenization, before a tokenizer
        sees them (a long run without spaces is quadratic in some, e.g. llama.cpp's BPE)."""
        try:
            context = self.model.context_size()
        except Exception:  # a backend that cannot say: the call itself reports an overflow
            context = None
        if not isinstance(context, int) or isinstance(context, bool) or context <= 0:
            return
        limit = context * MAX_CHARS_PER_TOKEN
        longest = max(texts, key=lambda what: len(texts[what]))
        total = sum(len(t) for t in texts.values())
        if total > limit:
            raise UserError(
                f"the {longest} is {len(texts[longest]):,} characters long: with it the prompt cannot fit "
                f"{self.model.display_name}'s {context:,}-token context (no token holds more than "
                f"{MAX_CHARS_PER_TOKEN} characters); shorten it to its answer, or use a model with a larger context")

    def _joint_now(self, notes: list[str], images: Images | None = None) -> bool:
        """Whether this verdict is scored jointly (a note says why not when joint was asked for)."""
        if not self.joint:
            return False
        if images and any(images.values()):
            notes.append(worded(f"{setting('joint')} scoring is not used with images: each criterion was scored "
                                "separately"))
            return False
        if self.reasoning:
            notes.append(worded(f"{setting('joint')} scoring is not used with {setting('reasoning')}: "
                                "each criterion was scored separately"))
            return False
        if not joint_scoring.supports(self.model):
            notes.append(f"{self.model.display_name} cannot hold a joint reply to its format (no grammar or structured "
                         "outputs; a joint reply without one costs more than separate scoring): each criterion "
                         "was scored separately")
            return False
        return True

    def plan_score(self, task: str, candidate: str, images: Images | None = None
                   ) -> tuple[list[PlannedCall], list[str]]:
        """The calls of a pointwise verdict (``images``: the task's and the candidate's, already loaded)."""
        _require_text(task, "task")
        _require_text(candidate, "candidate")
        require_vision(self.model, bool(images and any(images.values())))
        self._require_fits({"task": task, "candidate": candidate})
        repeats, notes = self._repeats(pairwise=False)
        if self._joint_now(notes, images):
            return joint_scoring.plan_score(self, task, candidate, repeats), notes
        calls = []
        for rep in repeats:
            for crit in self.criteria.items:
                calls.append(self._alone(_Tag(crit.name, rep.index, "candidate", None, None, rep.seed),
                                         {"task": task, "candidate": candidate}, images))
        return calls, notes

    def _alone(self, tag: _Tag, texts: dict[str, str], images: Images | None = None) -> PlannedCall:
        """The ordinary one-slot call for ``tag`` (``texts``: task and candidate, or task, first and second;
        ``images`` keyed the same way)."""
        crit = next(c for c in self.criteria.items if c.name == tag.criterion)
        if tag.slot is None:
            req = pointwise_request(texts["task"], texts["candidate"], crit, self.criteria.note, self.scale,
                                    reasoning=self.reasoning, seed=tag.seed, mitigation=self.injection_mitigation,
                                    images=images)
        else:
            req = pairwise_request(texts["task"], texts["first"], texts["second"], crit, self.criteria.note,
                                   self.scale, target=tag.slot, reasoning=self.reasoning, seed=tag.seed,
                                   mitigation=self.injection_mitigation, images=images)
        return PlannedCall(req, tag)

    def plan_compare(self, task: str, a: str, b: str, only_repeat: int | None = None,
                     images: Images | None = None) -> tuple[list[PlannedCall], list[str]]:
        """The calls of a pairwise verdict (``images``: keys "task", "a" and "b", already loaded)."""
        _require_text(task, "task")
        _require_text(a, "candidate A")
        _require_text(b, "candidate B")
        require_vision(self.model, bool(images and any(images.values())))
        self._require_fits({"task": task, "candidate A": a, "candidate B": b})
        if only_repeat is None:
            repeats, notes = self._repeats(pairwise=True)
        else:  # one repeat of a tournament
            repeats, notes = [repeat(only_repeat, pairwise=True, reasoning=self.reasoning, seed=self.seed)], []
        if self._joint_now(notes, images):
            return joint_scoring.plan_compare(self, task, a, b, repeats), notes
        calls = []
        im = images or {}
        for rep in repeats:
            first, second = (a, b) if rep.order == "AB" else (b, a)
            shown = None if not images else {
                "task": im.get("task", ()),
                "first": im.get("a" if rep.order == "AB" else "b", ()),
                "second": im.get("b" if rep.order == "AB" else "a", ())}
            for crit in self.criteria.items:  # criteria share the prefix up to the criterion
                for slot in ("A", "B"):
                    who = ("a" if slot == "A" else "b") if rep.order == "AB" else ("b" if slot == "A" else "a")
                    calls.append(self._alone(_Tag(crit.name, rep.index, who, slot, rep.order, rep.seed),
                                             {"task": task, "first": first, "second": second}, shown))
        return calls, notes

    def estimate_score(self, task: str, candidate: str) -> Estimate:
        return self.executor.estimate(self.plan_score(task, candidate)[0])

    def estimate_compare(self, task: str, a: str, b: str) -> Estimate:
        return self.executor.estimate(self.plan_compare(task, a, b)[0])

    # -- running -------------------------------------------------------------------------
    def _readings(self, outcomes: list[CallOutcome]) -> list[Reading]:
        """One Reading per slot of one-slot calls (joint calls: :meth:`_joint_readings`)."""
        return [self._reading(o.call.tag, None if o.response is None else vars(o.response), o, True)
                for o in outcomes]

    def _reading(self, t: _Tag, slot: dict | None, o: CallOutcome, first: bool) -> Reading:
        """A Reading of one slot (``slot``: label_probs, label_mass, unseen_mass; None when the call
        failed); the call's tokens, time and reasoning go on its ``first`` slot only, so sums stay true."""
        if slot is None:
            return Reading(t.criterion, t.repeat, t.candidate, t.slot, t.order, {}, 0.0, 0.0,
                           None, seed=t.seed, error=o.error, call_key=o.call.key)
        resp = o.response
        error = None
        value = None
        if slot["label_mass"] > 0:
            value = (self.scale.argmax_value(slot["label_probs"]) if self.discrete
                     else self.scale.expectation(slot["label_probs"]))
        else:
            error = "no probability on any score label (the model answered off-format)"
        cost = (resp.prompt_tokens, resp.prompt_tokens_total, resp.completion_tokens, resp.latency_s) if first else (0, 0, 0, 0.0)
        se = None
        if resp.samples and value is not None:  # the draws that wrote a label estimate the distribution
            se = value_se(slot["label_probs"], {lab: self.scale.value(lab) for lab in self.scale.labels},
                          round(slot["label_mass"] * resp.samples))
        return Reading(t.criterion, t.repeat, t.candidate, t.slot, t.order, slot["label_probs"], slot["label_mass"],
                       slot["unseen_mass"], value, *cost, o.cache_hit, t.seed, resp.reasoning if first else "",
                       error, o.call.key, resp.strategy, resp.prefilled, resp.samples, se)

    async def _start(self, calls: list[PlannedCall], notes: list[str],
                     progress: Callable[[CallOutcome], None] | None = None) -> tuple[list[Reading], list[str], object]:
        await self.acheck_labels()
        before = self.executor.usage.copy()
        outcomes = await self.executor.arun(calls, progress=progress)
        if calls and isinstance(calls[0].tag, joint_scoring.JointTag):
            readings, again, said = joint_scoring.split(outcomes, self._reading, self._alone)
            notes.extend(said)
            if again:
                readings += self._readings(await self.executor.arun(again, progress=progress))
        else:
            readings = self._readings(outcomes)
        errors = sorted({f"{r.criterion}: {r.error}" for r in readings if r.error})
        said = first_token_note({r.strategy for r in readings})
        if said and said not in notes:
            notes.append(said)
        return readings, errors, before

    def _base(self, k: int, notes: list[str], readings: list[Reading], errors: list[str], before,
              pairwise: bool) -> dict:
        return dict(model=self.model.uri, scale=self.scale.name, criteria_set=self.criteria.name,
                    repeats_requested=self._repeats_for(pairwise), repeats_effective=k, discrete=self.discrete,
                    readings=readings, notes=notes, errors=errors,
                    usage=self.executor.usage.since(before))

    def score(self, task: str, candidate: str, *, progress: Callable[[CallOutcome], None] | None = None,
              images: Images | None = None) -> ScoreResult:
        """Pointwise reward of one candidate; ``progress`` is called once per finished model call;
        ``images``: what the task and the candidate show (``{"task": [...], "candidate": [...]}``, loaded
        with ``veriscale.data.images.load_images``), recorded on the verdict."""
        return sync_edge.run(self.ascore(task, candidate, progress=progress, images=images))

    async def ascore(self, task: str, candidate: str, *,
                     progress: Callable[[CallOutcome], None] | None = None,
                     images: Images | None = None) -> ScoreResult:
        """:meth:`score`, awaited."""
        calls, notes = self.plan_score(task, candidate, images)
        readings, errors, before = await self._start(calls, notes, progress)
        k = len({r.repeat for r in readings})
        crits = {c.name: summarise_criterion([r for r in readings if r.criterion == c.name], self.scale.labels)
                 for c in self.criteria.items}
        rewards = [v["reward"] for v in crits.values()]
        reward = None if errors or any(x is None for x in rewards) else mean(rewards)
        return ScoreResult(**self._base(k, notes, readings, errors, before, False), reward=reward, criteria=crits,
                           injection=self.injection_flags({"candidate": candidate}), images=images_shown(images))

    def compare(self, task: str, a: str, b: str, *, only_repeat: int | None = None,
                progress: Callable[[CallOutcome], None] | None = None, images: Images | None = None) -> CompareResult:
        """Both candidates scored in one context (see :meth:`acompare`)."""
        return sync_edge.run(self.acompare(task, a, b, only_repeat=only_repeat, progress=progress, images=images))

    async def acompare(self, task: str, a: str, b: str, *, only_repeat: int | None = None,
                       progress: Callable[[CallOutcome], None] | None = None,
                       images: Images | None = None) -> CompareResult:
        """Both candidates scored in one context; P(a beats b) from the two rewards.

        ``only_repeat=r`` runs just repeat r (a shown first when r is even), for tournaments
        whose judge asks one repeat at a time; without --reasoning, r and r+2 are the same
        computation and come from the cache.
        """
        calls, notes = self.plan_compare(task, a, b, only_repeat, images)
        readings, errors, before = await self._start(calls, notes, progress)
        k = len({r.repeat for r in readings})
        crits: dict[str, dict] = {}
        for c in self.criteria.items:
            per = {who: summarise_criterion([r for r in readings if r.criterion == c.name and r.candidate == who],
                                            self.scale.labels) for who in ("a", "b")}
            crits[c.name] = {
                "reward_a": per["a"]["reward"], "reward_b": per["b"]["reward"],
                **{key: {who: per[who][key] for who in ("a", "b")}
                   for key in ("label_probs", "label_mass", "unseen_mass", "readings", "failed_readings")},
                "low_label_mass": per["a"]["low_label_mass"] or per["b"]["low_label_mass"],
            }
        ra = [v["reward_a"] for v in crits.values()]
        rb = [v["reward_b"] for v in crits.values()]
        flags = self.injection_flags({"a": a, "b": b})
        if errors or any(x is None for x in ra + rb):
            return CompareResult(**self._base(k, notes, readings, errors, before, True), tau=self.tau, criteria=crits,
                                 injection=flags, images=images_shown(images))
        reward_a, reward_b = mean(ra), mean(rb)
        p = sigmoid((reward_a - reward_b) / self.tau)
        if self._tau_note and self._tau_note not in notes:
            notes.append(self._tau_note)
        return CompareResult(**self._base(k, notes, readings, errors, before, True), reward_a=reward_a,
                             reward_b=reward_b, p_a_wins=p, tau=self.tau, criteria=crits, injection=flags,
                             images=images_shown(images))

    def injection_flags(self, texts: dict[str, str]) -> dict:
        """The ``injection_suspected`` fields for these candidate texts (see ``verify.injection.flag``)."""
        return injection_signal.flag(texts, self.injection_detect)


def images_shown(images: Images | None) -> dict[str, list[dict]]:
    """What a verdict records of the images it saw, by section (no bytes)."""
    return {what: [img.shown() for img in parts] for what, parts in (images or {}).items() if parts}


def _require_text(text: str, what: str) -> None:
    if not isinstance(text, str) or not text.strip():
        raise UserError(f"the {what} is empty: give it the text to verify")
    require_utf8(text, what)  # before it reaches a prompt, the store key or SQLite


__all__ = ["Verifier", "VerdictBase", "sigmoid"]
