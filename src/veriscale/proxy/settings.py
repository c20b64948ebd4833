"""What the proxies fan out to and how they pick: the config file's ``[proxy]`` table.

    [proxy]
    verifier = "http://127.0.0.1:8000/v1#judge"   # scores the candidates (needs logprobs); default: the model
    criteria = "agent"                          # built-in set or a Markdown file
    k = 2                                       # PPT pivots
    temperature = 0.8                           # sampling of the candidates (each gets its own seed)
    timeout_s = 120                             # per upstream call, and for the verification
    progress = true                             # track the agent's conversation after each reply
    schedule = "auto"                           # the pick: early | round_robin | auto (early when joint is on, N > 3)
    margin = 0.1                                # early pick: a pointwise lead below this is compared pairwise
    budget = "calls=6"                          # verifier calls (or tokens=N) one request's pick may spend

    [[proxy.candidates]]                        # heterogeneous pools: one table a model
    model = "http://127.0.0.1:8001/v1#qwen"     # an OpenAI-compatible upstream (or a [models.NAME])
    n = 3

    settings = proxy_settings(load_config(None))
    settings.candidates     # (("http://127.0.0.1:8001/v1#qwen", 3),)

The pick's injection settings (``injection_detect``, ``injection_mitigation``,
``injection_policy``) are the server's, resolved like every setting (flag, environment,
``[injection]``): ``proxy_settings(resolved, injection={"injection_policy": "lose_ties"})``.

Upstream keys come from the model URI's own environment variable (``OPENAI_API_KEY`` for
``openai:`` models, ``VERISCALE_API_KEY`` for HTTP URLs): the client's token authenticates
to the proxy only and is never forwarded.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping

from veriscale.config import Config
from veriscale.errors import UserError, setting
from veriscale.settings.sections import PROXY, section
from veriscale.verify.injection import check_policy

if TYPE_CHECKING:
    from veriscale.settings.resolve import Settings

#: the model name of the [[proxy.candidates]] pool, listed on GET /v1/models
DEFAULT_NAME = "veriscale"
Aliases = tuple[tuple[str, tuple[tuple[str, int], ...]], ...]
#: how the proxy picks among disagreeing candidates (``veriscale.proxy.pick``); auto: see ``schedule_now``
SCHEDULES = ("auto", "early", "round_robin")


@dataclass(frozen=True)
class ProxySettings:
    candidates: tuple[tuple[str, int], ...]  # (model URI or [models] name, N)
    verifier: str | None = None  # None: the server's --model
    criteria: str = "agent"
    k: int = 2
    temperature: float = 0.8
    timeout_s: float = 120.0
    progress: bool = True
    max_tokens: int = 1024  # when the client gives none
    schedule: str = "auto"  # SCHEDULES; --proxy-schedule, $VERISCALE_PROXY_SCHEDULE, [proxy] schedule
    margin: float = 0.1  # the early pick's closeness margin (veriscale.proxy.pick.CLOSE_MARGIN)
    models: tuple[tuple[str, tuple[str, ...]], ...] = ()  # the file's [models.NAME] endpoints, for candidate names
    aliases: Aliases = ()  # (name, ((model, N), ...)): [proxy.aliases], --proxy-aliases
    #: verifier calls or prompt tokens one request's pick may spend ("calls=6"; veriscale.proxy.budget_plan);
    #: --proxy-budget, $VERISCALE_PROXY_BUDGET, [proxy] budget. None: no budget
    budget: str | None = None
    #: SelectionSettings keywords for the pick: injection_detect, injection_mitigation, injection_policy
    injection: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_policy(self.injection.get("injection_policy", "none"))
        if self.schedule not in SCHEDULES:
            raise UserError(f"{setting('proxy_schedule')} {self.schedule!r} is unknown: use one of {', '.join(SCHEDULES)}")
        if not 0 <= self.margin <= 1:
            raise UserError(f"proxy.margin = {self.margin!r} is outside [0, 1]: give a reward difference such as 0.1")
        if self.budget is not None:
            from veriscale.selection.budget.form import parse_budget

            object.__setattr__(self, "budget", str(parse_budget(self.budget, where=setting("proxy_budget"))))

    def schedule_now(self, joint: bool, n: int) -> str:
        """The schedule a pick of ``n`` candidates uses: the setting, or for auto ``early`` under joint
        scoring when N > 3, else ``round_robin``. At N <= 3 round robin judges every pair in both
        slot orders (so a verdict that flips with the order is marked, as ``select`` marks it):
        N(N-1) <= 6 joint calls, and it added less latency than the early pick in
        benchmarks/bench_proxy.py --part pick (docs/PERFORMANCE.md); above 3 round robin is PPT,
        which makes more calls than N + 2."""
        if self.schedule != "auto":
            return self.schedule
        return "early" if joint and n > 3 else "round_robin"

    @property
    def n_total(self) -> int:
        return sum(n for _, n in self.candidates)


def _pool(text: str, where: str, default_n: int) -> tuple[tuple[str, int], ...]:
    """``"MODEL*N, MODEL*M"`` (no ``*N``: ``default_n``) as ((model, N), ...)."""
    pool = []
    for part in text.split(","):
        model, star, count = part.strip().rpartition("*") if "*" in part else (part.strip(), "", "")
        model = model.strip()
        if not model or (star and not count.strip().isdigit()) or (star and int(count) < 1):
            raise UserError(f"{where}: {text!r} is not a pool: write MODEL*N, MODEL*M (N >= 1) with a model URI or "
                            "[models] name each")
        pool.append((model, int(count) if star else default_n))
    return tuple(pool)


def parse_aliases(value: Any, where: str, default_n: int) -> Aliases:
    """Model names -> pools, from the file's ``[proxy.aliases]`` table or the text form
    ``"fast=qwen*2; best=qwen*3, gpt*1"``::

        parse_aliases({"fast": "qwen*2", "best": [{"model": "qwen", "n": 3}]}, "[proxy.aliases]", 3)
        # (("fast", (("qwen", 2),)), ("best", (("qwen", 3),)))
    """
    if value is None or value == "":
        return ()
    if isinstance(value, str):
        table: dict[str, Any] = {}
        for entry in value.split(";"):
            if not entry.strip():
                continue
            name, eq, pool = entry.partition("=")
            if not eq or not name.strip():
                raise UserError(f"{where}: {entry.strip()!r} is not an alias: write NAME=MODEL*N, MODEL*M; NAME2=MODEL")
            table[name.strip()] = pool.strip()
    elif isinstance(value, Mapping):
        table = dict(value)
    else:
        raise UserError(f"{where} must be a table of model names: fix that setting")
    aliases = []
    for name, pool in table.items():
        spot = f"{where} '{name}'"
        if not name.strip():
            raise UserError(f"{where} has an empty model name: give each alias a name")
        if isinstance(pool, str):
            aliases.append((name, _pool(pool, spot, default_n)))
            continue
        if not isinstance(pool, list) or not pool or not all(
                isinstance(e, dict) and isinstance(e.get("model"), str) and e["model"] and set(e) <= {"model", "n"}
                and isinstance(e.get("n", 1), int) and not isinstance(e.get("n", 1), bool) and e.get("n", 1) >= 1
                for e in pool):
            raise UserError(f"{spot} must be \"MODEL*N, ...\" or a list of {{ model = \"...\", n = N }} tables "
                            "(N >= 1): fix that line")
        aliases.append((name, tuple((e["model"], e.get("n", default_n)) for e in pool)))
    return tuple(aliases)


def proxy_settings(source: "Config | Settings", *, fallback_model: str | None = None, n: int | None = None,
                   injection: Mapping[str, Any] | None = None) -> ProxySettings | None:
    """The ``[proxy]`` table, checked; None when there is none and no ``n`` is given.

    ``source`` is the resolved settings (:func:`veriscale.settings.resolve.resolve`: flag, environment,
    file): ``proxy_schedule``, ``proxy_aliases`` and ``proxy_budget`` are read from it, so each has
    one fallback rule, the registry's. A bare :class:`Config` is resolved here (environment and file).
    ``n`` (``veriscale serve --proxy-n N``) fans out N candidates of ``fallback_model`` when the
    file names no candidates.
    """
    from veriscale.settings.resolve import resolve  # the settings registry (imported late: it imports the library)

    resolved = resolve(source) if isinstance(source, Config) else source
    cfg = resolved.config
    if not cfg.tables.get("proxy") and n is None and not resolved.proxy_aliases:
        return None
    table = section(PROXY, cfg)  # [proxy] by the one rule; its keys and types checked by load_config
    where = f"config file '{cfg.path}'"
    aliases, origin = resolved.proxy_aliases or None, resolved.origin("proxy_aliases")
    aliases_where = f"{where}: [proxy.aliases]" if origin.startswith("config file") else origin
    pools: list[tuple[str, int]] = []
    for entry in table["candidates"]:
        if not isinstance(entry, dict) or not isinstance(entry.get("model"), str) or not entry["model"]:
            raise UserError(f"{where}: each [[proxy.candidates]] needs model = \"<URI or [models] name>\"")
        count = entry.get("n", 1)
        if not isinstance(count, int) or isinstance(count, bool) or count < 1:
            raise UserError(f"{where}: [[proxy.candidates]] model {entry['model']} has n = {count!r}: give 1 or more "
                            "candidates (N = 0 would answer nothing)")
        pools.append((entry["model"], count))
    named = parse_aliases(aliases, aliases_where, sum(c for _, c in pools) or n or 1)
    if not pools and named and n is None:  # only aliases: the first one is also the default pool
        pools.extend(named[0][1])
    if not pools:
        if n is None or n < 1:
            raise UserError(f"the proxy needs N >= 1 candidates, not {n}: pass {setting('proxy_n', 3)} or add "
                            "[[proxy.candidates]] tables to the config file")
        pools.append((fallback_model or cfg.model or "embedded", n))
    settings = ProxySettings(candidates=tuple(pools), verifier=table["verifier"], criteria=table["criteria"],
                             k=table["k"], temperature=table["temperature"], timeout_s=table["timeout_s"],
                             progress=table["progress"], max_tokens=table["max_tokens"],
                             models=tuple(cfg.models.items()), injection=dict(injection or {}),
                             schedule=resolved.proxy_schedule, margin=table["margin"], aliases=named,
                             budget=resolved.proxy_budget)
    if settings.k < 1 or settings.timeout_s <= 0 or not 0 <= settings.temperature <= 2:
        raise UserError(f"{where}: proxy.k must be >= 1, proxy.timeout_s > 0 and proxy.temperature in [0, 2]")
    return settings
