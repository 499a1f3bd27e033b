"""The linted tree as one project: module names of its files, the order to read them in (a
module before the modules that import it), and what each module exports once read (what its
functions return, what its classes hold, its globals), so that a device tensor made in one
module and read in another is known on the device (:mod:`syncguard.lint.checker`).

Nothing is read twice: the files are read in import order and each one's summary is taken
from the one pass that finds its syncs. An import cycle is broken where it is met (the later
module is read without the earlier one's summary).
"""

from __future__ import annotations

import dataclasses
import os
import re
from typing import Dict, Iterable, Iterator, List, NamedTuple, Optional, Set, Tuple


class Always(NamedTuple):
    """A function that syncs on every path through it: the sync (``rule``, ``api``, ``why``
    and the ``backend`` of the first sure one), and the chain of calls that reaches it
    (``helper() -> torch.cuda.synchronize``)."""

    rule: str
    api: str
    why: str
    chain: str
    backend: str


@dataclasses.dataclass
class ClassInfo:
    """What the lint knows of a class: the places of its instances' attributes (``self.x``
    set in ``__init__``/``__post_init__``/``setup``, dataclass fields) and of its methods'
    returns."""

    name: str
    attrs: Dict[str, str] = dataclasses.field(default_factory=dict)
    methods: Dict[str, str] = dataclasses.field(default_factory=dict)
    #: methods that sync on every path
    syncs: Dict[str, Always] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class ModuleSummary:
    """What a module exports: function returns, classes (keys of :attr:`Project.classes`) and
    module globals, by name; places as in :mod:`.infer`."""

    returns: Dict[str, str] = dataclasses.field(default_factory=dict)
    classes: Dict[str, str] = dataclasses.field(default_factory=dict)
    globals: Dict[str, str] = dataclasses.field(default_factory=dict)
    #: functions that sync on every path
    syncs: Dict[str, Always] = dataclasses.field(default_factory=dict)


# `from a.b import c` / `from . import c` / `import a.b` at the start of a line (any indent)
_IMPORT = re.compile(r"^[ \t]*(?:from[ \t]+(\.*)([\w.]*)[ \t]+import\b|import[ \t]+([\w., \t]+))",
                     re.M)


def _import_lines(source: str) -> Iterator[re.Match[str]]:
    """``_IMPORT.finditer(source)``, trying the pattern only on lines that say ``import`` (a
    match never crosses a line, so each is on its own line, at its start)."""
    done = -1
    pos = source.find("import")
    while pos >= 0:
        start = source.rfind("\n", 0, pos) + 1
        if start > done:
            done = start
            m = _IMPORT.match(source, start)
            if m is not None:
                yield m
        pos = source.find("import", pos + 6)


class Project:
    """The files of one lint and their module names."""

    def __init__(self, files: Iterable[str], roots: Iterable[str]) -> None:
        #: module name -> file (absolute); file -> its module name
        self.modules: Dict[str, str] = {}
        self.names: Dict[str, str] = {}
        self.summaries: Dict[str, ModuleSummary] = {}
        #: every class read, by key (``module:Class``)
        self.classes: Dict[str, ClassInfo] = {}
        #: each path's absolute form, made once (``os.path.abspath`` asks the working folder
        #: every time)
        self._abs: Dict[str, str] = {}
        self._cwd = os.getcwd()
        #: folder -> it holds an ``__init__.py``
        packages: Dict[str, bool] = {}
        root_dirs = [os.path.abspath(r) for r in roots if os.path.isdir(r)]
        for f in files:
            a = self.abspath(f)
            names = [_package_name(a, packages)]
            for r in root_dirs:
                if a.startswith(r + os.sep):  # normalised, under r: the rest is the relpath
                    names.append(_dotted(a[len(r) + 1:]))
            self.names[a] = names[0]
            for n in names:
                self.modules.setdefault(n, a)

    def abspath(self, path: str) -> str:
        """``os.path.abspath(path)``, kept."""
        a = self._abs.get(path)
        if a is None:
            a = self._abs[path] = os.path.normpath(os.path.join(self._cwd, path))
        return a

    def module_of(self, path: str) -> str:
        return self.names.get(self.abspath(path), "")

    def resolve(self, importer: str, module: Optional[str], level: int) -> Optional[str]:
        """The module name ``from <level dots><module> import`` means in module ``importer``,
        when that module is in the project."""
        if level:
            pkg = importer.split(".")
            is_pkg = self.modules.get(importer, "").endswith("__init__.py")
            base = pkg if is_pkg else pkg[:-1]
            if level - 1 > len(base):
                return None
            base = base[:len(base) - (level - 1)]
            name = ".".join([*base, module] if module else base)
        else:
            name = module or ""
        return name if name in self.modules else None

    def order(self, files: List[str], sources: Dict[str, str],
              deps: Optional[Dict[str, List[str]]] = None) -> List[str]:
        """``files`` with each module after the in-project modules it imports (depth first,
        in the given order otherwise; a cycle is broken where it is met); ``deps`` what
        :meth:`deps` gave, when the caller has it."""
        if deps is None:
            deps = self.deps(files, sources)
        by_abs = {self.abspath(f): f for f in files}
        done: Set[str] = set()
        result: List[str] = []
        for f in files:
            stack: List[Tuple[str, int]] = [(self.abspath(f), 0)]
            on_stack: Set[str] = set()
            while stack:
                node, i = stack.pop()
                if node in done:
                    continue
                on_stack.add(node)
                ds = deps.get(node, [])
                while i < len(ds) and (ds[i] in done or ds[i] in on_stack
                                       or ds[i] not in by_abs):
                    i += 1
                if i < len(ds):
                    stack.append((node, i + 1))
                    stack.append((ds[i], 0))
                    continue
                on_stack.discard(node)
                done.add(node)
                result.append(by_abs[node])
        return result

    def deps(self, files: List[str], sources: Dict[str, str]) -> Dict[str, List[str]]:
        """The in-project modules each file imports, by absolute path (from the ``import``
        lines of its source, found without parsing it)."""
        deps: Dict[str, List[str]] = {}
        for f in files:
            a = self.abspath(f)
            me = self.names.get(a, "")
            out: List[str] = []
            for m in _import_lines(sources.get(f, "")):
                if m.group(3) is not None:
                    for part in m.group(3).split(","):
                        name = part.strip().split(" ")[0].strip()
                        target = self.modules.get(name)
                        if target:
                            out.append(target)
                    continue
                r = self.resolve(me, m.group(2) or None, len(m.group(1)))
                if r is not None:
                    out.append(self.modules[r])
            deps[a] = out
        return deps


def _dotted(rel: str) -> str:
    parts = rel[:-3].replace(os.sep, "/").split("/") if rel.endswith(".py") else rel.split("/")
    if parts and parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(p for p in parts if p not in ("", "."))


def _package_name(path: str, packages: Optional[Dict[str, bool]] = None) -> str:
    """``a.b.c`` for ``.../a/b/c.py`` where ``a/`` and ``b/`` hold an ``__init__.py``; the bare
    name for a module outside any package (``stopping`` for ``examples/x/stopping.py``).
    ``packages``: what is known already of folders holding an ``__init__.py``."""
    if packages is None:
        packages = {}
    d, name = os.path.split(path)
    parts = [] if name == "__init__.py" else [name[:-3] if name.endswith(".py") else name]
    while _is_package(d, packages):
        d, pkg = os.path.split(d)
        parts.append(pkg)
        if not pkg:
            break
    return ".".join(reversed(parts))


def _is_package(d: str, packages: Dict[str, bool]) -> bool:
    known = packages.get(d)
    if known is None:
        known = packages[d] = os.path.isfile(os.path.join(d, "__init__.py"))
    return known
