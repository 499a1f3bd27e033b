"""The one writer of CI annotations: GitHub workflow commands and SARIF 2.1.0 logs, for the
runtime gate (:mod:`.ci`) and the lint (:mod:`syncguard.lint.render`) alike. Every value is
escaped here (a path or message can never start a second workflow command or leave its JSON
string). Torch-free, like the lint."""

from __future__ import annotations

import os
from typing import Any, Dict, List, Optional

from .. import _escape
from .._version import __version__
from ..core.sites import display_path

SARIF_SCHEMA_URI = (
    "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
)
#: Used when the installed distribution names no project URL.
DEFAULT_INFORMATION_URI = "https://pypi.org/project/syncguard/"


def version() -> str:
    return __version__


def information_uri() -> str:
    """The project's URL from the installed distribution's metadata, else PyPI's page."""
    try:
        from importlib.metadata import PackageNotFoundError, metadata

        try:
            md = metadata("syncguard")
        except PackageNotFoundError:
            return DEFAULT_INFORMATION_URI
        home = md["Home-page"] if "Home-page" in md else None
        if home and home.startswith(("http://", "https://")):
            return home
        for entry in md.get_all("Project-URL") or []:
            url = entry.split(",", 1)[-1].strip()
            if url.startswith(("http://", "https://")):
                return url
    except Exception:  # metadata is best effort; never fail the report for it
        pass
    return DEFAULT_INFORMATION_URI


def workflow_command(level: str, path: str, line: int, title: str, message: str,
                     col: Optional[int] = None, end_line: Optional[int] = None) -> str:
    """One GitHub Actions annotation (``::error file=,line=,...::message``), without its
    newline; ``col`` is 1-based."""
    props = f"file={_escape.gh_property(path)},line={line}"
    if col is not None:
        props += f",col={col}"
    if end_line is not None:
        props += f",endLine={end_line}"
    props += f",title={_escape.gh_property(title)}"
    return f"::{level} {props}::{_escape.gh_data(message)}"


def artifact_location(filename: str) -> Dict[str, Any]:
    """A SARIF ``artifactLocation``: relative to ``%SRCROOT%`` (the current directory) when
    the file lies under it, else a ``file://`` URI; a ``<string>`` name as it is."""
    p = display_path(filename)
    if filename.startswith("<"):
        return {"uri": _escape.uri_path(p, "")}
    if os.path.isabs(p) or p.startswith("/"):
        return {"uri": "file://" + _escape.uri_path(p if p.startswith("/") else "/" + p, "/:")}
    return {"uri": _escape.uri_path(p, "/"), "uriBaseId": "%SRCROOT%"}


def location(filename: str, region: Dict[str, Any]) -> Dict[str, Any]:
    """A SARIF ``location`` of ``filename`` at ``region`` (``startLine``...)."""
    return {"physicalLocation": {"artifactLocation": artifact_location(filename),
                                 "region": region}}


def sarif_log(name: str, rules: List[Dict[str, Any]], results: List[Dict[str, Any]],
              invocation: Dict[str, Any], properties: Dict[str, Any]) -> Dict[str, Any]:
    """A SARIF 2.1.0 log of one run of tool ``name`` (syncguard's version and URL), with
    ``%SRCROOT%`` set to the current directory."""
    root = os.getcwd().replace(os.sep, "/")
    run: Dict[str, Any] = {
        "tool": {"driver": {
            "name": name,
            "version": version(),
            "semanticVersion": version(),
            "informationUri": information_uri(),
            "rules": rules,
        }},
        "originalUriBaseIds": {"%SRCROOT%": {
            "uri": "file://" + _escape.uri_path(root if root.startswith("/") else "/" + root, "/:")
            + "/"}},
        "invocations": [invocation],
        "results": results,
        "properties": properties,
    }
    return {"$schema": SARIF_SCHEMA_URI, "version": "2.1.0", "runs": [run]}
