"""Text from sessions and rollouts, shown to a person: escaped, never interpreted.

A rollout or a session can write anything: terminal escapes (a window title, an OSC 52
clipboard write, a screen clear), Rich markup (``[link=…]`` becomes an OSC 8 link) or Markdown
that turns into links. Whatever of it reaches a terminal goes through :func:`for_terminal` (a
Rich ``Text``: no markup, control characters shown as escapes) and whatever reaches a Markdown
file through :func:`for_markdown`::

    console.print(for_terminal("\\x1b]52;c;aGk=\\x07[link=http://x]y[/link]"))
    # prints \\x1b]52;c;aGk=\\x07[link=http://x]y[/link] as plain characters
    console.print(for_terminal_lines(skill_text))   # many lines, each escaped; newlines kept
    console.print(assembled(("warning: ", "yellow"), session_note))  # a fixed label, then untrusted text
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


def for_terminal_lines(text: object, style: str = "") -> Text:
    """Like :func:`for_terminal`, but line breaks are kept: each line escaped on its own (tabs kept too)."""
    lines = [visible(line.replace("\t", "    ")) for line in str(text).splitlines()]
    return Text("\n".join(lines), style=style)


def assembled(*parts: "str | tuple[str, str] | Text") -> Text:
    """One ``Text`` of ``parts``: a ``(text, style)`` pair is our own styled label, a ``Text`` is kept,
    and a plain string is untrusted text, escaped by :func:`for_terminal`. Nothing is read as markup."""
    out = Text()
    for part in parts:
        if isinstance(part, Text):
            out.append_text(part)
        elif isinstance(part, tuple):
            out.append(part[0], style=part[1])
        else:
            out.append_text(for_terminal(part))
    return out


def for_markdown(text: object) -> str:
    """``text`` for a Markdown table cell or list item: escaped controls, no table breaks, no links or HTML."""
    out = visible(text)
    for ch in ("\\", "|", "`", "[", "]", "<", ">"):
        out = out.replace(ch, "\\" + ch)
    return out


def for_code_span(text: object) -> str:
    """``text`` inside a Markdown code span (`` `…` ``): escaped controls, no closing backtick, no table break."""
    return visible(text).replace("`", "'").replace("|", "\\|")
