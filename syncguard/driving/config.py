"""``[tool.syncguard]`` in pyproject.toml: settings shared by the pytest plugin and the CLI,
and the one rule that finds the file (:func:`config_file`).

Keys: ``max_syncs`` (plugin), ``allow`` (plugin, ``syncguard check`` and ``exec``), ``devices``
(plugin), ``exhaustive`` (plugin and ``exec``: count the reads made in C++ in cpu mode, see
:func:`syncguard.driving.devices.exhaustive_for`). Torch-free and pytest-free.
"""

from __future__ import annotations

import os
from typing import Any, Dict, Iterable, List, Optional, Tuple

from ..errors import UsageError
from ..process.untrusted import UntrustedError, parse_toml, read_text

#: The keys ``[tool.syncguard]`` may hold (a typo is an error, not a silent no-op).
KEYS = ("allow", "device", "devices", "exhaustive", "max_syncs", "lint")


def load_tool_table(path: str) -> Dict[str, Any]:
    """The ``[tool.syncguard]`` table of ``path`` ({} when absent). Raises ValueError naming
    the file when it cannot be read or the table is not a table."""
    try:  # a regular UTF-8 file, size bounded, never blocking on a FIFO
        data = parse_toml(read_text(path, "pyproject.toml", 16 << 20), path)
    except UntrustedError as exc:
        raise ValueError(str(exc)) from None
    tool = data.get("tool", {})
    if not isinstance(tool, dict):
        raise ValueError(f"{path}: tool: must be a table")
    return checked_table(tool.get("syncguard", {}), path, "tool.syncguard", KEYS)


def config_file(explicit: Optional[str] = None, start: str = ".") -> Optional[str]:
    """The configuration file: ``explicit`` (``--config``, pytest's ``-c pyproject.toml``)
    when given, else the nearest ``pyproject.toml`` at or above ``start`` (a folder, or a
    file's folder): the working folder for ``check`` and ``exec``, the first path for
    ``lint``, pytest's rootdir for the plugin. None when there is none."""
    if explicit is not None:
        return explicit
    d = os.path.abspath(start if os.path.isdir(start) else os.path.dirname(start) or ".")
    while True:
        path = os.path.join(d, "pyproject.toml")
        if os.path.isfile(path):
            return path
        if os.path.dirname(d) == d:
            return None
        d = os.path.dirname(d)


def allow_sites(allow: Iterable[Any], config: Optional[str]) -> Tuple[Tuple[str, str], ...]:
    """``[tool.syncguard] allow`` of ``config`` (a path; None: no file) then the ``--allow``
    sites, as (site, reason); a bad file or entry is a :class:`UsageError`."""
    try:
        table = load_tool_table(config) if config is not None else {}
        return (to_allow(table.get("allow", ()), f"[tool.syncguard] allow in {config}")
                + to_allow(allow, "--allow"))
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def exhaustive(flag: Optional[bool], config: Optional[str]) -> bool:
    """The user's ``exhaustive``: ``--exhaustive`` (``flag``), else ``[tool.syncguard]
    exhaustive`` of ``config`` (a path; None: no file); a bad value is a :class:`UsageError`."""
    try:
        table = load_tool_table(config) if config is not None else {}
        return first_flag((flag, "--exhaustive", False),
                          (table.get("exhaustive"), f"{config}: [tool.syncguard] exhaustive",
                           False))
    except ValueError as exc:
        raise UsageError(str(exc)) from None


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
