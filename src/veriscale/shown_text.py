"""Text from sessions and rollouts, shown to a person: escaped, never interpreted.

A rollout or a session can write anything: terminal escapes (a window title, an OSC 52
clipboard write, a screen clear), Rich markup (``[link=…]`` becomes an OSC 8 link) or Markdown
that turns into links. Whatever of it reaches a terminal goes through :func:`for_terminal` (a
Rich ``Text``: no markup, control characters shown as escapes) and whatever reaches a Markdown
file through :func:`for_markdown`::

    console.print(for_terminal("\\x1b]52;c;aGk=\\x07[link=http://x]y[/link]"))
    # prints \\x1b]52;c;aGk=\\x07[link=http://x]y[/link] as plain characters
    for_markdown("a|b [x](y)")     # a\\|b \\[x\\](y)   (no table break, no link)
    for_code_span("a`b")           # a'b              (a key shown as code)
"""

from __future__ import annotations

from rich.text import Text

from veriscale.errors import one_line


def visible(text: object) -> str:
    """``text`` on one line with every control, format and lone-surrogate character written as an escape."""
    return one_line(str(text))


def for_terminal(text: object, style: str = "") -> Text:
    """``text`` as a Rich ``Text``: printed as it reads, never as markup or terminal control."""
    return Text(visible(text), style=style)


def for_markdown(text: object) -> str:
    """``text`` for a Markdown table cell or list item: escaped controls, no table breaks, no links or HTML."""
    out = visible(text)
    for ch in ("\\", "|", "`", "[", "]", "<", ">"):
        out = out.replace(ch, "\\" + ch)
    return out


def for_code_span(text: object) -> str:
    """``text`` inside a Markdown code span (`` `…` ``): escaped controls, no closing backtick, no table break."""
    return visible(text).replace("`", "'").replace("|", "\\|")
