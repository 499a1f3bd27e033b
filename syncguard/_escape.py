"""Escaping of untrusted text for every output syncguard writes.

Names, ids, file names and messages come from scenario files and result files, which may be
crafted. Each output has its own rules, applied here and nowhere else:

- :func:`terminal`: control characters (C0, DEL, C1) and bidirectional overrides shown as
  visible escapes (``\\x1b``, ``\\n``, ``\\u202e``), so text never moves the cursor, starts a
  line (a GitHub workflow command in a CI log) or recolours a terminal; a ``::`` that could
  begin a line (at the start or after a space, where a table wraps) becomes ``\\x3a:``.
- :func:`no_workflow_lines` / :class:`LineSafeStream`: the last word on everything printed:
  no line of it begins (after spaces or colours, which the GitHub runner skips) with ``::``,
  even where a table cell was folded mid-word.
- :func:`csv_cell`: a CSV cell a spreadsheet never reads as a formula (``= + - @``, tab, CR
  at the start get a leading ``'``), control characters visible.
- :func:`gh_data` / :func:`gh_property`: GitHub workflow-command escaping (``%``, CR, LF; also
  ``:`` and ``,`` in properties).
- :func:`xml_text`: characters XML 1.0 forbids replaced by visible escapes (JUnit).
- :func:`md_text` / :func:`md_code`: Markdown text with HTML and Markdown syntax escaped, and
  code spans that the text cannot close early.
- :func:`one_line`: an error message as exactly one terminal line.

Torch-free and dependency-free.
"""

from __future__ import annotations

import html as _html
import re
from typing import IO, Any, Callable, Optional, cast

#: Scenario names and request ids: letters, digits and ``_ . + -``, starting with a letter,
#: digit or ``_``; at most :data:`NAME_MAX` characters.
NAME_MAX = 64
NAME_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]*\Z")
NAME_RULE = (f"letters, digits and _ . + - only (starting with a letter, digit or _), "
             f"at most {NAME_MAX} characters")

# C0 controls, DEL, C1 controls, and the Unicode bidi embeddings/overrides/isolates that can
# reorder what a reader sees ("Trojan source"), plus the line/paragraph separators.
# Lone surrogates too (a file name that is not UTF-8, read with surrogateescape; a crafted
# result's "\ud800"): no UTF-8 stream can write them, so unescaped they end the command.
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069"
                     "\ud800-\udfff]")
_SURROGATE = re.compile("[\ud800-\udfff]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _visible(m: re.Match[str]) -> str:
    ch = m.group(0)
    if ch in _NAMED:
        return _NAMED[ch]
    o = ord(ch)
    return f"\\x{o:02x}" if o < 0x100 else f"\\u{o:04x}"


def name_problem(value: str) -> Optional[str]:
    """Why ``value`` is not a safe scenario name or request id (None when it is)."""
    if not value:
        return "must not be empty"
    if len(value) > NAME_MAX or not NAME_RE.match(value):
        return f"must use {NAME_RULE}, got {terminal(repr(value)[:NAME_MAX * 2])}"
    return None


# "::" where a line could begin once the text is printed: at its start, or after a space where
# a table may wrap it onto a new line (the GitHub runner skips leading spaces)
_WORKFLOW = re.compile(r"(?:^|(?<=\s))::")
# "::" at the start of a line after spaces, tabs or colour codes (SGR sequences)
_WORKFLOW_LINE = re.compile(r"^((?:[ \t]|\x1b\[[0-9;]*m)*)::", re.MULTILINE)
_LINE_START = re.compile(r"(?:[ \t]|\x1b\[[0-9;]*m)*\Z")


def terminal(s: Any) -> str:
    """``s`` as text safe on a terminal or in a CI log: every control character (newlines
    included) and bidi override replaced by a visible escape, and a ``::`` that could begin a
    line (a GitHub workflow command) shown as ``\\x3a:``."""
    return _WORKFLOW.sub("\\\\x3a:", _UNSAFE.sub(_visible, str(s)))


def no_workflow_lines(text: str, at_line_start: bool = True) -> str:
    """``text`` (many lines, as printed) with every line that begins with ``::`` after
    spaces or colour codes made inert (``\\x3a:``). ``at_line_start``: whether ``text``
    continues a line holding only spaces so far (False: it continues other text)."""
    if at_line_start:
        return _WORKFLOW_LINE.sub(r"\1\\x3a:", text)
    head, sep, rest = text.partition("\n")  # the first line continues other text: as it is
    return head + sep + _WORKFLOW_LINE.sub(r"\1\\x3a:", rest) if sep else text


class LineSafeStream:
    """A text stream that writes to ``target()`` (resolved at each write, so a replaced
    ``sys.stdout`` is followed) through :func:`no_workflow_lines`; everything else (isatty,
    fileno, encoding) is the target's. Rich consoles print reports through it."""

    def __init__(self, target: Any) -> None:
        self._target = target
        self._at_start = True

    def write(self, text: str) -> int:
        self._target().write(no_workflow_lines(text, self._at_start))
        tail = text.rpartition("\n")[2]
        self._at_start = bool(_LINE_START.match(tail)) and (self._at_start or "\n" in text)
        return len(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._target(), name)


def line_safe(target: Callable[[], IO[str]]) -> IO[str]:
    """A :class:`LineSafeStream` on ``target()``, typed as the stream it stands for."""
    return cast(IO[str], LineSafeStream(target))


def csv_cell(v: Any) -> Any:
    """A CSV cell: text starting with ``= + - @`` (or tab, CR) gets a leading ``'`` so no
    spreadsheet runs it as a formula; control characters shown as escapes. Numbers and
    None pass unchanged."""
    if not isinstance(v, str):
        return v
    t = _UNSAFE.sub(_visible, v)  # "::" is harmless in a file: kept as it is
    return "'" + t if v[:1] in ("=", "+", "-", "@", "\t", "\r") else t


def one_line(s: Any) -> str:
    """An error or warning message as one terminal line (see :func:`terminal`)."""
    return terminal(str(s).strip())


def gh_data(s: Any) -> str:
    """A GitHub workflow-command message: ``%``, CR and LF percent-encoded (the runner
    decodes them), other control characters made visible."""
    t = str(s).replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return terminal(t)


def gh_property(s: Any) -> str:
    """A GitHub workflow-command property value (``file=``, ``title=``): ``%``, CR, LF, ``:``
    and ``,`` percent-encoded (the runner decodes them, so ``file=`` names the real file),
    other control characters made visible. No ``::`` can remain, so the terminal's ``\\x3a:``
    is not applied (it would name a file that does not exist)."""
    t = (str(s).replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
         .replace(":", "%3A").replace(",", "%2C"))
    return _UNSAFE.sub(_visible, t)


def no_surrogates(s: str) -> str:
    """``s`` with each lone surrogate shown as ``\\udcxx`` (text bound for a file format
    that must be valid Unicode: JSON, SARIF, XML); everything else unchanged."""
    return _SURROGATE.sub(_visible, s) if _SURROGATE.search(s) else s


# XML 1.0 Char: #x9 | #xA | #xD | [#x20-#xD7FF] | [#xE000-#xFFFD] | [#x10000-#x10FFFF]
_XML_BAD = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def xml_text(s: Any) -> str:
    """Text an XML 1.0 document may hold: forbidden characters (NUL, ESC, other C0 controls,
    lone surrogates, U+FFFE/U+FFFF) replaced by visible escapes. The XML writer still escapes
    ``<``, ``&`` and quotes."""
    return _XML_BAD.sub(_visible, str(s))


def json_safe(obj: Any) -> Any:
    """``obj`` (JSON data) with lone surrogates in its strings and keys shown as ``\\udcxx``
    (:func:`no_surrogates`): JSON with lone surrogate escapes is refused by strict readers
    (SARIF uploads)."""
    if isinstance(obj, str):
        return no_surrogates(obj)
    if isinstance(obj, dict):
        return {json_safe(k): json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    return obj


def uri_path(path: str, safe: str = "/") -> str:
    """``path`` percent-encoded for a URI: a file name that is not UTF-8 (lone surrogates from
    ``surrogateescape``) as its own bytes, as a URI names such a file."""
    from urllib.parse import quote

    try:
        raw = path.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a surrogate no byte stands for (a crafted name)
        raw = path.encode("utf-8", "surrogatepass")
    return quote(raw, safe=safe)


def junit_text(s: Any) -> str:
    """One line of JUnit XML text or attribute: as :func:`terminal` (newlines and controls
    visible, no line-starting ``::``, lone surrogates visible), then :func:`xml_text`."""
    return xml_text(terminal(s))


def md_text(s: Any) -> str:
    """Plain Markdown text on one line: HTML special characters entity-escaped, Markdown
    punctuation (``\\ ` * _ [ ] | ~``) backslash-escaped, control characters visible."""
    t = terminal(str(s).replace("\r\n", " ").replace("\n", " ").replace("\r", " "))
    t = _html.escape(t, quote=False)
    for ch in "\\`*_[]|~":
        t = t.replace(ch, "\\" + ch)
    return t


def md_code(s: Any) -> str:
    """A Markdown code span holding ``s`` literally that ``s`` cannot close early: the fence is
    one backtick longer than the longest backtick run in ``s``; ``|`` escaped for table cells;
    newlines and control characters made visible. Raw HTML inside a code span is literal."""
    t = terminal(str(s)).replace("|", "\\|")
    longest = max((len(r) for r in re.findall("`+", t)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if t.startswith("`") or t.endswith("`") or (t.startswith(" ") and
                                                          t.endswith(" ")) else ""
    return f"{fence}{pad}{t}{pad}{fence}"


def plot_text(s: Any) -> str:
    """Text for a matplotlib title or legend: controls visible, ``$`` escaped so data never
    switches on mathtext (a malformed formula would fail the plot)."""
    return terminal(s).replace("$", "\\$")


def html_text(s: Any) -> str:
    """HTML text: special characters (quotes included) entity-escaped, controls visible."""
    return _html.escape(terminal(s), quote=True)
