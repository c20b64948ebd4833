"""Secrets out of what leaves the store: known key and token shapes become a marker naming the kind.

The store keeps the raw text (a verdict is judged on what the agent really saw); only what leaves
it is redacted: the dashboard and the REST API of ``veriscale serve``, and ``veriscale runs
show|export``. Each of them calls the same :class:`Redactor` on the JSON-ready document it sends::

    r = Redactor.build(patterns=[r"corp-[0-9a-f]{32}"])
    r("export OPENAI_API_KEY=sk-proj-4fQ...")     # 'export OPENAI_API_KEY=[redacted:openai-key]'
    r({"messages": [{"content": "token: eyJhbGciOi..."}]})   # every string inside, keys too
    Redactor.build(enabled=False)("sk-...")       # unchanged: --no-redact, for local debugging

A user pattern (``--redact PATTERN``, ``[redact] patterns`` in the config file) replaces its whole
match with ``[redacted:custom]``. Only the secret itself is replaced: ``api_key=`` and the words
around it stay, so the text still reads.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Callable

from veriscale.errors import UserError, setting

_EDGE = r"(?<![A-Za-z0-9_\-])"  # a key starts a token: "task-..." is not "sk-..."
_END = r"(?![A-Za-z0-9_\-])"


def _has_digit_and_letter(value: str) -> bool:
    """Random key material mixes both; words, slugs and dotted code paths rarely do."""
    return any(c.isdigit() for c in value) and any(c.isalpha() for c in value)


def _not_placeholder(value: str) -> bool:
    """``$OPENAI_API_KEY``, ``<your-key>``, ``{token}``, ``xxxxxxxx...`` and code are not secrets."""
    if value[0] in "$<{%(*" or len(set(value.lower())) < 6:
        return False
    return _has_digit_and_letter(value)


@dataclass(frozen=True)
class Rule:
    """One secret shape: ``pattern``'s group ``group`` is the secret, ``check`` (if any) must accept it."""

    kind: str
    pattern: re.Pattern[str]
    group: int = 0
    check: Callable[[str], bool] | None = None
    hints: tuple[str, ...] = ()  # the rule runs only on text holding one of these (lower-cased: any case)
    any_case: bool = False

    def may_match(self, text: str, lower: str) -> bool:
        return not self.hints or any(h in (lower if self.any_case else text) for h in self.hints)

    @property
    def marker(self) -> str:
        return f"[redacted:{self.kind}]"


_NAMES = (r"api[_\-]?key|apikey|access[_\-]?key|access[_\-]?token|auth[_\-]?token|refresh[_\-]?token|"
          r"secret[_\-]?key|client[_\-]?secret|private[_\-]?key|token|secret|password|passwd|pwd")

# Order matters: the specific shapes first, so "sk-ant-..." is named Anthropic, not OpenAI, and a
# key already replaced by its marker is not matched again by the generic assignment rule.
RULES: tuple[Rule, ...] = (
    Rule("private-key", re.compile(
        r"-----BEGIN ((?:[A-Z0-9]+ )*)PRIVATE KEY(?: BLOCK)?-----"
        r"(?:[A-Za-z0-9+/=\s\\]|Proc-Type:[^\n]*|DEK-Info:[^\n]*|Comment:[^\n]*)*"
        r"(?:-----END \1PRIVATE KEY(?: BLOCK)?-----)?"), hints=("PRIVATE KEY-----",)),
    Rule("anthropic-key", re.compile(_EDGE + r"sk-ant-[A-Za-z0-9_\-]{20,}" + _END), hints=("sk-ant-",)),
    Rule("openai-key", re.compile(_EDGE + r"sk-(?:proj-|svcacct-|admin-|None-)?[A-Za-z0-9_\-]{20,}" + _END),
         check=_has_digit_and_letter, hints=("sk-",)),
    Rule("github-token", re.compile(_EDGE + r"(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})" + _END),
         hints=("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_")),
    Rule("aws-access-key-id", re.compile(r"(?<![A-Z0-9])(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}(?![A-Z0-9])"),
         hints=("AKIA", "ASIA", "ABIA", "ACCA")),
    Rule("aws-secret-key", re.compile(
        r"(?i:aws_?secret_?(?:access_?)?key|secret_?access_?key)[\"']?\s*(?:[:=]|=>)\s*[\"']?"
        r"([A-Za-z0-9/+=]{40})(?![A-Za-z0-9/+=])"), group=1, hints=("secret",), any_case=True),
    Rule("slack-token", re.compile(_EDGE + r"xox[baprs]-[A-Za-z0-9\-]{10,}" + _END), hints=("xox",)),
    Rule("google-api-key", re.compile(_EDGE + r"AIza[0-9A-Za-z_\-]{35}" + _END), hints=("AIza",)),
    Rule("hf-token", re.compile(_EDGE + r"hf_[A-Za-z0-9]{30,}" + _END), check=_has_digit_and_letter, hints=("hf_",)),
    Rule("jwt", re.compile(_EDGE + r"eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]*" + _END),
         hints=("eyJ",)),
    Rule("bearer-token", re.compile(
        r"(?i:\bauthorization[\"']?\s*[:=]\s*[\"']?\s*(?:bearer|basic|token)\s+|\bbearer\s+)"
        r"([A-Za-z0-9._~+/\-]{16,}=*)(?![A-Za-z0-9._~+/\-=])"), group=1, check=_not_placeholder,
         hints=("bearer", "authorization"), any_case=True),
    Rule("secret", re.compile(
        r"(?<![A-Za-z0-9])(?i:" + _NAMES + r")(?![A-Za-z])(?:\\?[\"'])?\s*(?:[:=]|=>)\s*(?:\\?[\"'])?"
        r"([^\s\\\"'`,;()\[\]{}<>]{16,})"), group=1, check=_not_placeholder,
         hints=("key", "token", "secret", "password", "passwd", "pwd"), any_case=True),
)


def _custom(pattern: str, where: str | None) -> Rule:
    """A user pattern, compiled; ``where`` says which config entry gave it (None: the flag)."""
    named = f"the {setting('redact')} pattern {pattern!r} in {where}" if where else setting("redact", pattern)
    try:
        compiled = re.compile(pattern)
    except re.error as exc:
        raise UserError(f"{named} is not a valid regular expression ({exc.msg}): fix the pattern or drop it") from None
    if compiled.fullmatch(""):
        raise UserError(f"{named} matches the empty text, so it would mark every gap: make it match at least one "
                        "character") from None
    return Rule("custom", compiled)


@dataclass(frozen=True)
class Redactor:
    """Redacts a string or every string of a JSON-ready document (see the module docstring)."""

    rules: tuple[Rule, ...] = RULES
    enabled: bool = True

    @classmethod
    def build(cls, patterns: Iterable[str] = (), *, enabled: bool = True, where: str | None = None) -> "Redactor":
        """The built-in shapes plus ``patterns`` (user regexes; a bad one is a :class:`UserError`)."""
        return cls(RULES + tuple(_custom(p, where) for p in patterns), enabled)

    def adding(self, patterns: Iterable[str], where: str | None = None) -> "Redactor":
        """This redactor with more user patterns."""
        return Redactor(self.rules + tuple(_custom(p, where) for p in patterns), self.enabled)

    def __call__(self, value: Any) -> Any:
        """``value`` with every secret it holds replaced by its marker; the input is not changed."""
        if not self.enabled:
            return value
        return self._walk(value)

    def _walk(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {self.text(k) if isinstance(k, str) else k: self._walk(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [self._walk(v) for v in value]
        if value is None or isinstance(value, (bool, int, float)):
            return value
        return self.text(str(value))  # a Path, a datetime...: sent as its text, so redacted as text

    def text(self, text: str, found: list[tuple[str, str]] | None = None) -> str:
        """``text`` with each secret replaced by ``[redacted:KIND]`` and everything around it kept;
        each (kind, secret) replaced is appended to ``found`` when given (for reports and tests)."""
        if not text:
            return text
        lower = text.lower()
        for rule in self.rules:
            if rule.may_match(text, lower):
                text = rule.pattern.sub(lambda m, rule=rule: _replace(m, rule, found), text)
        return text

    def findings(self, text: str) -> list[tuple[str, str]]:
        """Each (kind, secret) :meth:`text` replaces in ``text``."""
        found: list[tuple[str, str]] = []
        self.text(text, found)
        return found


def _replace(m: re.Match[str], rule: Rule, found: list[tuple[str, str]] | None) -> str:
    secret = m.group(rule.group)
    if rule.check is not None and not rule.check(secret):
        return m.group(0)
    if found is not None:
        found.append((rule.kind, secret))
    start, end = m.span(rule.group)
    whole = m.group(0)
    return whole[:start - m.start()] + rule.marker + whole[end - m.start():]


NO_REDACTION = Redactor(enabled=False)
