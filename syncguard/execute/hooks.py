"""``--step MODULE:QUALNAME`` (and ``--loop``): wrap a named function or method as a step (or
a loop's step boundary), at once when its module is imported already, else right after the
module's body runs (a post-import hook on ``sys.meta_path``), before any ``from module import
name`` can capture the original."""

from __future__ import annotations

import ast
import dataclasses
import importlib.machinery
import importlib.util
import inspect
import sys
import threading
import types
from typing import Any, Dict, List, Optional, Sequence, Set, Tuple

from ..core import steps as markers
from ..core.steps import wrap_loop, wrap_step
from ..errors import SyncguardError


class StepSpecError(SyncguardError, ValueError):
    """A ``--step`` that cannot work: one line, exit code 2."""


@dataclasses.dataclass
class StepTarget:
    """One ``--step`` (or ``--loop``): module, qualified name within it, and what happened
    to it."""

    spec: str
    module: str
    qualname: str
    installed: bool = False
    error: Optional[str] = None
    flag: str = "--step"

    @property
    def loop(self) -> bool:
        """Each call begins a step that lasts until the next call (``--loop``)."""
        return self.flag == "--loop"

    @property
    def label(self) -> str:
        return self.qualname


def parse_step(spec: str, flag: str = "--step") -> StepTarget:
    """``pkg.mod:Class.method`` -> a :class:`StepTarget` of ``flag`` (``--step`` or
    ``--loop``); raises :class:`StepSpecError`."""
    mod, sep, qual = spec.partition(":")
    names = qual.split(".")
    if not sep or not mod or not all(n.isidentifier() for n in names) or not all(
            p.isidentifier() for p in mod.split(".")):
        raise StepSpecError(f"{flag} {spec!r}: expected MODULE:QUALNAME, e.g. "
                            f"sglang.srt.managers.scheduler:Scheduler.run_batch")
    return StepTarget(spec, mod, qual, flag=flag)


def _module_file(name: str) -> Optional[str]:
    """The source file of module ``name``, found without importing anything (None when it
    is not on sys.path now, or not a plain source file)."""
    parts = name.split(".")
    path: Optional[List[str]] = None
    spec = None
    for i in range(len(parts)):
        try:
            spec = importlib.machinery.PathFinder.find_spec(".".join(parts[: i + 1]), path)
        except (ImportError, ValueError):
            return None
        if spec is None:
            return None
        path = list(spec.submodule_search_locations or [])
    origin = getattr(spec, "origin", None)
    return origin if origin and origin.endswith(".py") else None


def findable(name: str) -> bool:
    """Whether module ``name``'s top-level package can be found on ``sys.path`` now (by
    every finder, as an import would; nothing is imported). A name none finds is a typo or
    the wrong folder: it would only be reported after the whole run."""
    top = name.split(".")[0]
    if top in sys.modules:
        return True
    try:
        return importlib.util.find_spec(top) is not None
    except (ImportError, ValueError):
        return True  # a finder that failed: let the run tell


def static_missing(target: StepTarget, source: Optional[str] = None) -> Optional[str]:
    """Why ``target`` is certainly missing, read from its module's source (or ``source``, a
    file) without running it (None when it is there, or when only running it can tell)."""
    if source is None and target.module in sys.modules:
        return None
    path = source or _module_file(target.module)
    if path is None:
        return None
    try:
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), path)
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return None
    body: List[ast.stmt] = tree.body
    names = target.qualname.split(".")
    for depth, name in enumerate(names):
        found: Optional[ast.stmt] = None
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                if node.name in (name, "__getattr__"):
                    found = node
            elif _may_bind(node, name):
                return None  # bound by an import, assignment or conditional: run to tell
        if found is None:
            where = ".".join([target.module] + names[:depth])
            return f"{where} has no attribute {name!r} ({path})"
        if not isinstance(found, ast.ClassDef) or found.name != name or found.decorator_list:
            return None  # set at run time, or a class a decorator may change
        if found.keywords or depth == len(names) - 1:  # a metaclass; or the class itself
            return None
        if found.bases:
            attr = names[depth + 1]
            if not any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
                       and n.name == attr for n in found.body):
                # inherited, unless every base is known (this file's classes, or classes of
                # modules imported already: nothing is imported here) and lacks it too
                if any(_may_bind(n, attr) for n in found.body
                       if not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef,
                                             ast.ClassDef))):
                    return None
                known = _bases_lacking(found, tree, attr)
                if known is None:
                    return None
                bases, have = known
                where = ".".join([target.module] + names[:depth + 1])
                have.update(n.name for n in found.body
                            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)))
                nor = f", nor has its base {', '.join(bases)}" if bases else ""
                return f"{where} has no attribute {attr!r}{nor}{_near(attr, have)} ({path})"
        body = found.body
    return None


def _near(attr: str, names: Set[str]) -> str:
    """``; did you mean 'forward'?`` when one of ``names`` is spelled close to ``attr``."""
    import difflib

    close = difflib.get_close_matches(attr, sorted(n for n in names if not n.startswith("__")),
                                      n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


def _bases_lacking(cls: ast.ClassDef, tree: ast.Module, attr: str,
                   depth: int = 0) -> Optional[Tuple[List[str], Set[str]]]:
    """The names of the bases of ``cls`` and the attributes they have, when every base (and,
    for a base defined in the same file, its own bases) is known and none has ``attr``; None
    when one is unknown or has it (running the program would have to tell)."""
    import builtins

    if depth > 8 or cls.keywords:
        return None
    out: List[str] = []
    have: Set[str] = set()
    for base in cls.bases:
        local = _local_class(base, tree)
        if local is not None:
            if local is cls or local.decorator_list or any(
                    (isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                     and n.name == attr) or _may_bind(n, attr) for n in local.body):
                return None
            inner = _bases_lacking(local, tree, attr, depth + 1)
            if inner is None:
                return None
            out.append(local.name)
            have.update(inner[1])
            have.update(n.name for n in local.body
                        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)))
            continue
        obj = _imported(base, tree)
        if obj is None and isinstance(base, ast.Name) and not _bound(tree, base.id):
            obj = getattr(builtins, base.id, None)
        if not isinstance(obj, type) or type(obj) is not type and type(obj).__module__ != "abc":
            return None  # unknown, or a metaclass that may make attributes
        if hasattr(obj, attr):
            return None
        if obj is not object:
            out.append(f"{obj.__module__}.{obj.__qualname__}")
            have.update(dir(obj))
    return out, have


def _local_class(base: ast.expr, tree: ast.Module) -> Optional[ast.ClassDef]:
    """The class ``base`` names when it is defined at the top of this file (and bound only
    there)."""
    if not isinstance(base, ast.Name):
        return None
    defs = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == base.id]
    others = [n for n in tree.body if not isinstance(n, ast.ClassDef) and _may_bind(n, base.id)]
    return defs[0] if len(defs) == 1 and not others else None


def _bound(tree: ast.Module, name: str) -> bool:
    return any(_may_bind(n, name) or (isinstance(
        n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n.name == name)
        for n in tree.body)


def _imported(base: ast.expr, tree: ast.Module) -> Any:
    """The object ``base`` (``nn.Module``, ``Module``) names through one top-level import of
    a module already imported (``sys.modules``; nothing is imported here); None otherwise."""
    chain: List[str] = []
    node = base
    while isinstance(node, ast.Attribute):
        chain.insert(0, node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    binds = [n for n in tree.body if _may_bind(n, node.id)]
    if len(binds) != 1 or not isinstance(binds[0], (ast.Import, ast.ImportFrom)):
        return None
    imp = binds[0]
    alias = next((a for a in imp.names if (a.asname or a.name.split(".")[0]) == node.id), None)
    if alias is None or alias.name == "*":
        return None
    obj: Any
    if isinstance(imp, ast.Import):
        mod = alias.name if alias.asname else alias.name.split(".")[0]
        obj = sys.modules.get(mod)
    else:
        if imp.level or not imp.module or imp.module not in sys.modules:
            return None
        obj = getattr(sys.modules[imp.module], alias.name, None)
        if obj is None:
            obj = sys.modules.get(f"{imp.module}.{alias.name}")
    for part in chain:
        obj = getattr(obj, part, None)
    return obj


def _may_bind(node: ast.stmt, name: str) -> bool:
    """Whether ``node`` (not a def or class) may bind ``name`` at module or class level."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.alias) and (sub.name == "*" or (
                sub.asname or sub.name.split(".")[0]) == name):
            return True
        if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store) and sub.id == name:
            return True
        if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and (
                sub.name == name):
            return True
        if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Name) and sub.func.id in (
                "setattr", "globals", "exec"):
            return True
    return False


class _Installed:
    """One patched attribute, to restore exactly."""

    def __init__(self, owner: Any, name: str, had_own: bool, original: Any) -> None:
        self.owner, self.name, self.had_own, self.original = owner, name, had_own, original

    def restore(self) -> None:
        if self.had_own:
            setattr(self.owner, self.name, self.original)
        else:
            try:
                delattr(self.owner, self.name)
            except AttributeError:
                pass


#: the module whose import makes the step wrappers safe under torch.compile (_compile_safe)
_DYNAMO = "torch._dynamo"


def _compile_safe() -> None:
    """Dynamo runs the step wrappers as plain Python where they are the function
    ``torch.compile`` was given (their callee, the step function, still compiled, each call
    a step), and a wrapper it traces inside a one-graph region is a plain call
    (:func:`syncguard.core.steps.under_compile`). Without this, ``fullgraph=True`` on a
    ``--step`` or ``--loop`` function fails (a ContextVar read, ``sys._getframe``)."""
    import torch

    compiler = getattr(torch, "compiler", None)
    tracing = getattr(compiler, "is_dynamo_compiling", None) or getattr(
        compiler, "is_compiling", None)
    if tracing is None:  # a torch too old to tell
        return
    wrappers, work = markers.under_compile(tracing)
    try:
        from torch._dynamo import eval_frame as ef

        for codes, inner in ((wrappers, ef.FrameAction.DEFAULT), (work, ef.FrameAction.SKIP)):
            for code in codes:
                ef.set_code_exec_strategy(code, ef.FrameExecStrategy(ef.FrameAction.SKIP,
                                                                     inner))
    except (ImportError, AttributeError):  # a torch without per-code rules (< 2.6)
        pass


class StepHooks:
    """Owns the ``--step`` wrappers: installs them (now or on import) and removes them."""

    def __init__(self, targets: Sequence[StepTarget]) -> None:
        self.targets = list(targets)
        self._patched: List[_Installed] = []
        self._finder: Optional[_PostImportFinder] = None
        self._lock = threading.RLock()
        self._dynamo = False  # _compile_safe done

    def watches(self, module: str) -> bool:
        """Whether ``module``'s import is awaited (a target's module, or Dynamo's)."""
        return (module == _DYNAMO and not self._dynamo) or module in self.pending()

    def main_names(self) -> List[str]:
        """First names of the targets in the program's own code (``__main__``)."""
        return sorted({t.qualname.split(".")[0] for t in self.targets if t.module == "__main__"})

    def pending(self) -> Dict[str, List[StepTarget]]:
        out: Dict[str, List[StepTarget]] = {}
        for t in self.targets:
            if not t.installed and t.error is None:
                out.setdefault(t.module, []).append(t)
        return out

    def install(self) -> None:
        markers.forget_inlined()
        for name in [*self.pending(), _DYNAMO]:
            if name == "__main__":  # the program's own code: bound by .mainhook as it runs
                continue
            mod = sys.modules.get(name)
            if mod is None:
                continue
            spec = getattr(mod, "__spec__", None)
            if getattr(spec, "_initializing", False) and (
                    type(spec) is importlib.machinery.ModuleSpec):
                # its body runs now (the guard started inside its import, as in a followed
                # child whose module imports torch first): wrapped once the body ran
                spec.__class__ = _SpecOnReady
                spec._syncguard_ready = (self.module_ready, mod)  # type: ignore[attr-defined]
                continue
            self.module_ready(mod)
        if self.pending() or not self._dynamo:
            self._finder = _PostImportFinder(self)
            sys.meta_path.insert(0, self._finder)

    def uninstall(self) -> None:
        with self._lock:
            if self._finder is not None:
                try:
                    sys.meta_path.remove(self._finder)
                except ValueError:
                    pass
                self._finder = None
            while self._patched:
                self._patched.pop().restore()

    def main_ready(self, mod: types.ModuleType) -> None:
        """Wrap the pending ``__main__`` targets in ``mod``, the program's main module as a
        spawn child re-imports it (``__mp_main__``)."""
        with self._lock:
            self._wrap_pending(mod, "__main__")

    def module_ready(self, mod: types.ModuleType) -> None:
        """Wrap every pending target of ``mod`` (called right after its body ran). For the
        program's own code (``__main__``, called after each binding statement while it
        runs) only targets whose first name is bound by now: the others stay pending until
        their own statement (:meth:`errors` names those never defined)."""
        with self._lock:
            if mod.__name__ == _DYNAMO and not self._dynamo:
                self._dynamo = True
                _compile_safe()
            self._wrap_pending(mod, mod.__name__)

    def _wrap_pending(self, mod: types.ModuleType, name: str) -> None:
        """Wrap the pending targets of module ``name`` in ``mod`` (those of ``__main__`` once
        their first name is bound)."""
        for t in self.pending().get(name, []):
            if t.module == "__main__" and t.qualname.split(".")[0] not in vars(mod):
                continue
            try:
                self._patch(mod, t)
                t.installed = True
            except StepSpecError as exc:
                t.error = str(exc)

    def _patch(self, mod: types.ModuleType, t: StepTarget) -> None:
        names = t.qualname.split(".")
        owner: Any = mod
        for i, n in enumerate(names[:-1]):
            try:
                owner = getattr(owner, n)
            except AttributeError:
                raise StepSpecError(f"{t.flag} {t.spec}: {'.'.join([t.module] + names[:i])} has "
                                    f"no attribute {n!r}") from None
        last = names[-1]
        try:
            raw = inspect.getattr_static(owner, last)
        except AttributeError:
            raise StepSpecError(f"{t.flag} {t.spec}: {'.'.join([t.module] + names[:-1])} has no "
                                f"attribute {last!r}") from None
        # an inherited method is patched on the named class only, and deleted afterwards
        had_own = not isinstance(owner, type) or last in owner.__dict__
        original = raw
        wrap = wrap_loop if t.loop else wrap_step
        if isinstance(raw, staticmethod):
            new: Any = staticmethod(wrap(raw.__func__, t.label))
        elif isinstance(raw, classmethod):
            new = classmethod(wrap(raw.__func__, t.label))  # type: ignore[arg-type]
        elif getattr(raw, "__syncguard_step__", None) is not None:
            if had_own:
                return  # already a step
            new = wrap(raw.__wrapped__, t.label)  # a base class's step, renamed here
        elif callable(raw):
            new = wrap(raw, t.label)
        else:
            raise StepSpecError(f"{t.flag} {t.spec}: {type(raw).__name__} is not a function or "
                                f"method")
        setattr(owner, last, new)
        self._patched.append(_Installed(owner, last, had_own, original))

    def notes(self) -> List[str]:
        """One line per target whose calls inside a one-graph compiled region were not
        steps (:func:`syncguard.core.steps.inlined`)."""
        names = set(markers.inlined())
        return [f"{t.flag} {t.spec}: called inside a torch.compile(fullgraph=True) region, "
                f"where no step boundary can run: those calls are not steps (name the "
                f"compiled function, or its caller)" for t in self.targets
                if t.installed and t.label in names]

    def errors(self) -> List[str]:
        """One line per target that was never installed: attribute missing, or its module
        never imported by the program."""
        out = [t.error for t in self.targets if t.error]
        for t in self.targets:
            if t.installed or t.error is not None:
                continue
            if t.module == "__main__":
                out.append(f"{t.flag} {t.spec}: the program never defined "
                           f"{t.qualname.split('.')[0]} at its top level")
            else:
                out.append(f"{t.flag} {t.spec}: module {t.module} was never imported by the "
                           f"program, so no call of {t.qualname} was seen")
        return out


class _SpecOnReady(importlib.machinery.ModuleSpec):
    """The spec of a module whose body is running when the hooks are installed: the import
    system sets ``spec._initializing = False`` right after the body ran (importlib's
    ``_load_unlocked``, 3.9 to 3.13), and that assignment calls back, once."""

    def __setattr__(self, name: str, value: Any) -> None:
        object.__setattr__(self, name, value)
        if name == "_initializing" and not value:
            ready = self.__dict__.pop("_syncguard_ready", None)
            self.__class__ = importlib.machinery.ModuleSpec  # type: ignore[assignment]
            if ready is not None:
                ready[0](ready[1])


def find_elsewhere(me: Any, fullname: str, path: Any = None, target: Any = None) -> Any:
    """The spec the finders on ``sys.meta_path`` other than ``me`` give ``fullname`` (None
    when none does): what an import would load, for a finder that watches imports."""
    for finder in sys.meta_path:
        if finder is me or not hasattr(finder, "find_spec"):
            continue
        spec = finder.find_spec(fullname, path, target)
        if spec is not None:
            return spec
    return None


class _PostImportFinder:
    """A ``sys.meta_path`` finder that finds nothing itself: for a watched module it asks the
    other finders, then has the module's loader call back once the body ran."""

    def __init__(self, hooks: StepHooks) -> None:
        self.hooks = hooks
        self._busy = threading.local()

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if not self.hooks.watches(fullname) or getattr(self._busy, "on", False):
            return None
        self._busy.on = True
        try:
            spec = find_elsewhere(self, fullname, path, target)
        except (ImportError, ValueError):
            return None
        finally:
            self._busy.on = False
        loader = getattr(spec, "loader", None) if spec is not None else None
        if loader is None or isinstance(loader, type) or not hasattr(loader, "exec_module"):
            return spec  # shared or odd loaders: the module is patched at the end instead
        orig_exec = loader.exec_module
        hooks = self.hooks

        def exec_module(module: types.ModuleType) -> None:
            try:
                orig_exec(module)
            finally:
                try:
                    del loader.exec_module  # back to the class's method
                except AttributeError:
                    pass
            hooks.module_ready(module)

        loader.exec_module = exec_module
        return spec

