"""``[tool.syncguard]`` in pyproject.toml: settings shared by the pytest plugin and the CLI.

Keys: ``max_syncs`` (plugin), ``allow`` (plugin, ``syncguard check`` and ``exec``), ``devices``
(plugin), ``exhaustive`` (plugin and ``exec``: count the reads made in C++ in cpu mode, see
:func:`syncguard.driving.devices.exhaustive_for`). Torch-free and pytest-free.
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, List, Optional, Tuple

#: The keys ``[tool.syncguard]`` may hold (a typo is an error, not a silent no-op).
KEYS = ("allow", "device", "devices", "exhaustive", "max_syncs", "lint")


def load_tool_table(path: str) -> Dict[str, Any]:
    """The ``[tool.syncguard]`` table of ``path`` ({} when absent). Raises ValueError naming
    the file when it cannot be read or the table is not a table."""
    from ..core.untrusted import UntrustedError, parse_toml, read_text

    try:  # a regular UTF-8 file, size bounded, never blocking on a FIFO
        data = parse_toml(read_text(path, "pyproject.toml", 16 << 20), path)
    except UntrustedError as exc:
        raise ValueError(str(exc)) from None
    tool = data.get("tool", {})
    if not isinstance(tool, dict):
        raise ValueError(f"{path}: tool: must be a table")
    return checked_table(tool.get("syncguard", {}), path, "tool.syncguard", KEYS)


def checked_table(table: Any, path: str, name: str, keys: Iterable[str]) -> Dict[str, Any]:
    """``table`` (the TOML table ``[name]`` of ``path``) when it is a table with only ``keys``;
    else ValueError naming the file, the table and the first unknown key."""
    if not isinstance(table, dict):
        raise ValueError(f"{path}: [{name}] must be a table")
    known = list(keys)
    unknown = sorted(set(table) - set(known))
    if unknown:
        raise ValueError(f"{path}: [{name}] {unknown[0]}: unknown key "
                         f"(known: {', '.join(known)})")
    return table


def to_allow(specs: Iterable[Any], where: str) -> Tuple[Tuple[str, str], ...]:
    """Allow-list entries as (site, reason): ``"file.py:line"``, ``"pkg.mod:function"``,
    ``"function"``, ``(site, reason)`` or ``{site = ..., reason = ...}``."""
    out: List[Tuple[str, str]] = []
    if isinstance(specs, (str, dict)):
        specs = [specs]
    for s in specs:
        if isinstance(s, str) and s:
            out.append((s, f"allowed call site {s} ({where})"))
        elif isinstance(s, dict) and isinstance(s.get("site"), str) and s["site"]:
            reason = s.get("reason") or f"allowed call site {s['site']} ({where})"
            out.append((s["site"], str(reason)))
        elif (isinstance(s, (tuple, list)) and len(s) == 2
              and all(isinstance(x, str) and x for x in s)):
            out.append((s[0], s[1]))
        else:
            raise ValueError(f"{where}: allow entries are 'file.py:line', 'pkg.mod:function', "
                             f"'function', (site, reason) or {{site = ..., reason = ...}}; "
                             f"got {s!r}")
    return tuple(out)


_TRUE = ("true", "yes", "on", "1")
_FALSE = ("false", "no", "off", "0")


def to_flag(value: Any, where: str, text: bool = False) -> Optional[bool]:
    """A yes/no setting (``exhaustive``) as given in TOML or a marker (``True``/``False``),
    or with ``text`` in an ini file (``true``/``false``, ``yes``/``no``, ``on``/``off``,
    ``1``/``0``); None when not given (None, or an empty ini value). ValueError naming
    ``where`` otherwise (a TOML string ``"yes"`` included: TOML has booleans)."""
    if value is None or isinstance(value, bool):
        return value
    if text and isinstance(value, str):
        v = value.strip().lower()
        if not v:
            return None
        if v in _TRUE:
            return True
        if v in _FALSE:
            return False
    raise ValueError(f"{where}: must be true or false, got {value!r}")


def first_flag(*layers: Tuple[Any, str, bool]) -> bool:
    """The first given of ``layers`` ((value, where, text), most specific first: a marker,
    the command line, the ini file, ``[tool.syncguard]``), each checked by :func:`to_flag`
    (a bad one raises even when a layer before it was given); False when none is."""
    out: Optional[bool] = None
    for value, where, text in layers:
        v = to_flag(value, where, text)
        if out is None:
            out = v
    return bool(out)
