"""Bench configurations: one point of a sweep, applied over the run's ``SelectionSettings``.

    configs = expand_configs(BenchConfig(k=2), parse_sweeps(["g=2,5,20"]), discrete_vs_continuous=True)
    configs[0].settings(SelectionSettings(criteria="agent"))   # scale letters:2, k=2, continuous

A config sets the scale granularity ``g`` (letters:G), the number of criteria ``c`` (the first
c of the set), ``repeats`` (pairs: K judgements per pair, 2 = both slot orders; pools:
judgements per comparison), the PPT pivots ``k`` (pools only) and discrete vs continuous
judging; ``scale`` is used when ``g`` is None.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, replace
from typing import Sequence

from veriscale.errors import UserError, setting
from veriscale.selection.settings import SelectionSettings

SWEEP_AXES = ("g", "k", "c", "repeats")


@dataclass(frozen=True)
class BenchConfig:
    """One setting to measure."""

    scale: str = "letters"
    g: int | None = None
    c: int | None = None
    repeats: int | None = None
    k: int = 2
    discrete: bool = False

    def scale_spec(self) -> str:
        return f"letters:{self.g}" if self.g is not None else self.scale

    def settings(self, base: SelectionSettings) -> SelectionSettings:
        """``base`` with this configuration's scale, criteria, repeats, pivots and judging mode."""
        crits = base.criteria_set()
        if self.c is not None:
            if self.c > len(crits.items):
                raise UserError(f"c={self.c} criteria asked but set '{crits.name}' has {len(crits.items)}: "
                                f"sweep c up to {len(crits.items)}")
            crits = crits.only([c.name for c in crits.items[: self.c]])
        return replace(base, scale=self.scale_spec(), criteria=crits, repeats=self.repeats, k=self.k,
                       discrete=self.discrete)

    def label(self, kind: str) -> str:
        parts = [f"G={self.g}" if self.g is not None else self.scale]
        if self.c is not None:
            parts.append(f"C={self.c}")
        if self.repeats is not None:
            parts.append(f"K={self.repeats}")
        if kind == "pools":
            parts.append(f"k={self.k}")
        parts.append("discrete" if self.discrete else "continuous")
        return " ".join(parts)


def parse_sweeps(specs: Sequence[str]) -> dict[str, list[int]]:
    """``["g=2,5,20", "k=1,2"]`` -> ``{"g": [2, 5, 20], "k": [1, 2]}``; bad specs raise a UserError."""
    axes: dict[str, list[int]] = {}
    for spec in specs:
        name, sep, values = spec.partition("=")
        name = name.strip().lower()
        if not sep or name not in SWEEP_AXES:
            raise UserError(f"{setting('sweep')} '{spec}' is not AXIS=V1,V2,...: use one of {', '.join(SWEEP_AXES)}, e.g. g=2,5,20")
        try:
            numbers = [int(v) for v in values.split(",") if v.strip()]
        except ValueError:
            raise UserError(f"{setting('sweep')} '{spec}' has a value that is not a whole number: e.g. {name}=1,2,4") from None
        if not numbers or any(n < 1 for n in numbers):
            raise UserError(f"{setting('sweep')} '{spec}' needs whole numbers >= 1, e.g. {name}=1,2,4")
        if name in axes:
            raise UserError(f"{setting('sweep')} names '{name}' twice: give all its values in one {setting('sweep')}")
        axes[name] = numbers
    return axes


def expand_configs(base: BenchConfig, sweeps: dict[str, list[int]], *, discrete_vs_continuous: bool = False
                   ) -> list[BenchConfig]:
    """Every combination of the sweep values over ``base`` (continuous before discrete)."""
    names = list(sweeps)
    configs = []
    for values in itertools.product(*(sweeps[n] for n in names)):
        config = replace(base, **dict(zip(names, values)))
        if discrete_vs_continuous:
            configs += [replace(config, discrete=False), replace(config, discrete=True)]
        else:
            configs.append(config)
    return configs
