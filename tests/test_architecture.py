"""The package's structure, read from its own imports (lazy ones inside functions included;
``if TYPE_CHECKING:`` ones not): no import cycle, the engine never imports the command line,
nothing outside the case study imports it, and the bottom modules import nothing above them.
docs/architecture.md describes the layers."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Dict, List, Set, Tuple

import pytest

ROOT = Path(__file__).resolve().parent.parent
PKG = "syncguard"


def _modules() -> Dict[str, Path]:
    out = {}
    for path in (ROOT / PKG).rglob("*.py"):
        rel = path.relative_to(ROOT).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _type_checking_nodes(tree: ast.AST) -> Set[int]:
    skip: Set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip.update(id(n) for n in ast.walk(node))
    return skip


def _owner(name: str) -> str:
    """The module of ``name`` (a module, or an attribute of one)."""
    while name not in MODULES and "." in name:
        name = name.rsplit(".", 1)[0]
    return name


#: a relative ``"module:function"`` spec, as a registry names what it imports on first use
#: (``".html:render"``, ``"..trace:render"``): a lazy import too
_SPEC = re.compile(r"(\.+)([A-Za-z_][\w.]*):[A-Za-z_]\w*")


def _targets(mod: str, node: ast.stmt) -> Set[str]:
    """The package's modules one import statement of ``mod`` names: ``from . import sub``
    counts as ``sub`` only; a name that is not a module counts as the module it is taken from."""
    is_pkg = MODULES[mod].name == "__init__.py"
    if isinstance(node, ast.Import):
        return {_owner(a.name) for a in node.names if a.name.startswith(PKG)} & set(MODULES)
    assert isinstance(node, ast.ImportFrom)
    if node.level:
        base = mod.split(".") if is_pkg else mod.split(".")[:-1]
        base = base[:len(base) - (node.level - 1)]
        target = ".".join(base + ([node.module] if node.module else []))
    else:
        target = node.module or ""
    if not target.startswith(PKG):
        return set()
    subs = {f"{target}.{a.name}" for a in node.names if f"{target}.{a.name}" in MODULES}
    if len(subs) < len(node.names):
        subs.add(_owner(target))
    return subs & set(MODULES)


def _imports(mod: str, type_checking: bool = False) -> Set[str]:
    """The package's modules ``mod`` imports (with ``type_checking``, its ``if
    TYPE_CHECKING:`` imports too). ``from . import sub`` counts as ``sub`` only
    (the package ``__init__`` runs first anyway; a parent package is not a dependency); a
    relative ``"module:function"`` string (:data:`_SPEC`) counts as importing that module."""
    path = MODULES[mod]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = set() if type_checking else _type_checking_nodes(tree)
    is_pkg = path.name == "__init__.py"
    out: Set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        spec = (_SPEC.fullmatch(node.value) if isinstance(node, ast.Constant)
                and isinstance(node.value, str) else None)
        if spec:
            base = mod.split(".") if is_pkg else mod.split(".")[:-1]
            base = base[:len(base) - (len(spec.group(1)) - 1)]
            out.add(_owner(".".join(base + [spec.group(2)])))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            out |= _targets(mod, node)
    out.discard(mod)
    return {m for m in out if m in MODULES}


GRAPH = {m: _imports(m) for m in MODULES}
#: with the ``if TYPE_CHECKING:`` imports: a circle closed only for the type checker is still
#: two modules that cannot be read, moved or tested one without the other
TYPED_GRAPH = {m: _imports(m, type_checking=True) for m in MODULES}


def _cycles(graph: Dict[str, Set[str]] = GRAPH) -> List[List[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    on: Set[str] = set()
    found: List[List[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for m in sorted(MODULES):
        if m not in index:
            visit(m)
    return found


def _relative_beyond_the_package() -> List[str]:
    bad = []
    for mod, path in MODULES.items():
        depth = len(mod.split(".")) - (0 if path.name == "__init__.py" else 1)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level > depth:
                bad.append(f"{mod}:{node.lineno} (from {'.' * node.level}{node.module or ''})")
    return bad


def test_every_relative_import_stays_inside_the_package() -> None:
    """A function moved between modules keeps its lazy ``from .. import``: one that climbs
    above ``syncguard`` fails only when called."""
    assert not _relative_beyond_the_package()


def test_the_checker_sees_lazy_imports() -> None:
    """The checker counts an import inside a function (the CLI imports its subcommands so)."""
    assert "syncguard.cli.run" in GRAPH["syncguard.cli"]
    assert "syncguard.driving.runner" in GRAPH["syncguard.driving.run"]


def test_the_checker_sees_the_renderer_registry() -> None:
    """The renderer registry imports each renderer when first used, named by a spec string:
    those count as imports (a renderer asking the registry for another would be a cycle)."""
    assert {"syncguard.renderers.html", "syncguard.renderers.ci",
            "syncguard.renderers.trace"} <= GRAPH["syncguard.renderers"]


@pytest.mark.parametrize("graph", [GRAPH, TYPED_GRAPH], ids=["run", "with-type-checking"])
def test_no_import_cycle(graph: Dict[str, Set[str]]) -> None:
    cycles = _cycles(graph)
    detail = "; ".join(" <-> ".join(c) + " (" + ", ".join(
        f"{a} -> {b}" for a in c for b in sorted(graph[a] & set(c))) + ")" for c in cycles)
    assert not cycles, detail


def _front_end(m: str) -> bool:
    return m == "syncguard.__main__" or m == "syncguard.cli" or m.startswith("syncguard.cli.")


def test_the_engine_never_imports_the_command_line() -> None:
    bad = {m: sorted(d for d in deps if _front_end(d))
           for m, deps in GRAPH.items() if not _front_end(m)}
    assert not {m: d for m, d in bad.items() if d}


#: The case study: SGLang's Ascend sampling paths, a package of its own beside syncguard
CASE_STUDY = "sglang_ascend_sampling"


def _names_case_study(name: str) -> bool:
    return name == CASE_STUDY or name.startswith((CASE_STUDY + ".", CASE_STUDY + ":"))


def _case_study_uses(mod: str) -> List[str]:
    """Every way ``mod`` reaches the case study: an import of it (lazy, or under
    ``TYPE_CHECKING``: all count here), a relative import climbing out to it, or a string
    naming one of its modules (``importlib.import_module("sglang_ascend_sampling...")``, a
    table of ``module:object`` names)."""
    path = MODULES[mod]
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names: List[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [node.module or ""] if not node.level else [
                a.name for a in node.names] + [node.module or ""]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            names = [node.value.strip()]
        out += [f"{mod}:{node.lineno} {n}" for n in names if _names_case_study(n)]
    return out


def test_nothing_outside_the_case_study_imports_it() -> None:
    """The SGLang Ascend sampling paths are a plug-in (``sglang_ascend_sampling/``), found
    through the ``syncguard.subjects`` and ``syncguard.scenarios`` entry points, never named by
    the tool."""
    assert (ROOT / CASE_STUDY / "__init__.py").is_file()
    assert not (ROOT / PKG / "sampling").exists()  # no copy left inside the tool
    bad = [use for m in MODULES for use in _case_study_uses(m)]
    assert not bad


def test_the_case_study_check_sees_every_kind_of_use(tmp_path: Path) -> None:
    """The check above would catch an import, a lazy or TYPE_CHECKING one, and a name."""
    src = tmp_path / "leak.py"
    src.write_text("from typing import TYPE_CHECKING\n"
                   "if TYPE_CHECKING:\n    import sglang_ascend_sampling.batch\n"
                   "def f():\n    from sglang_ascend_sampling import sample\n"
                   "TABLE = {'legacy': 'sglang_ascend_sampling.subject:LegacySubject'}\n",
                   encoding="utf-8")
    MODULES["leak"] = src
    try:
        assert len(_case_study_uses("leak")) == 3
    finally:
        del MODULES["leak"]


#: The bottom of the package: what everything may import, importing nothing of syncguard but
#: each other.
BOTTOM = {"syncguard.errors", "syncguard._version", "syncguard._paths", "syncguard._words",
          "syncguard._escape", "syncguard.standin", "syncguard.console",
          "syncguard.devicenames"}


@pytest.mark.parametrize("mod", sorted(BOTTOM))
def test_the_bottom_imports_nothing_above_it(mod: str) -> None:
    assert GRAPH[mod] <= BOTTOM, GRAPH[mod] - BOTTOM


#: The layers, bottom first. A module imports only from its own layer or the layers below it
#: (docs/architecture.md). The package root (a lazy facade) is not a layer.
LAYERS = ("bottom", "process", "core", "sim", "model", "results", "gate", "renderers", "driving",
          "lint", "execute", "plugin", "cli")
_PACKAGES = {"process", "core", "sim", "model", "results", "gate", "driving", "renderers",
             "lint", "execute", "cli"}


def _layer(mod: str) -> str:
    parts = mod.split(".")
    if len(parts) == 1:
        return ""
    if parts[1] in _PACKAGES:
        return parts[1]
    return {"pytest_plugin": "plugin", "__main__": "cli"}.get(parts[1], "bottom")


def test_every_module_lies_in_a_layer() -> None:
    """A new top-level module is a decision: the bottom layer, or a layer's package."""
    top = {m for m in MODULES if len(m.split(".")) == 2 and _layer(m) == "bottom"}
    assert top <= BOTTOM, top - BOTTOM


def _upward(graph: Dict[str, Set[str]]) -> List[str]:
    rank = {name: i for i, name in enumerate(LAYERS)}
    return sorted(f"{m} ({_layer(m)}) -> {d} ({_layer(d)})"
                  for m, deps in graph.items() if _layer(m)
                  for d in deps if _layer(d) and rank[_layer(d)] > rank[_layer(m)])


def test_layers_depend_downwards_only() -> None:
    bad = _upward(GRAPH)
    assert not bad, "\n".join(bad)


#: Exceptions that are not syncguard's own errors: the torch_npu stand-in raises what the
#: hardware's operator raises (a user's ``except RuntimeError`` must behave the same).
_NOT_SYNCGUARD_ERRORS = {"TopKTopPContractError"}


def _exception_classes() -> Dict[str, List[str]]:
    """Every class the package defines whose bases name an ``...Error``/``Exception`` class:
    ``{"module.Class": [base names]}``."""
    out: Dict[str, List[str]] = {}
    for mod, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                bases = [ast.unparse(b).rsplit(".", 1)[-1] for b in node.bases]
                if any(b.endswith(("Error", "Exception")) for b in bases):
                    out[f"{mod}.{node.name}"] = bases
    return out


def test_one_error_root() -> None:
    """Every error syncguard raises on purpose derives from ``SyncguardError`` (errors.py),
    which carries its exit code; the command line catches that one class."""
    classes = _exception_classes()
    assert "syncguard.errors.UsageError" in classes
    ours = {name.rsplit(".", 1)[-1] for name in classes} | {"SyncguardError"}
    rooted = {"SyncguardError"}
    for _ in range(len(classes)):  # a subclass of a rooted class is rooted
        rooted |= {n.rsplit(".", 1)[-1] for n, bases in classes.items()
                   if any(b in rooted for b in bases)}
    exempt = rooted | _NOT_SYNCGUARD_ERRORS
    stray = sorted(n for n in classes if n.rsplit(".", 1)[-1] not in exempt)
    assert ours  # the walk found the package's classes
    assert not stray, stray
    cli = ast.parse((ROOT / PKG / "cli" / "__init__.py").read_text(encoding="utf-8"))
    caught = {ast.unparse(h.type) for h in ast.walk(cli)
              if isinstance(h, ast.ExceptHandler) and h.type is not None}
    ours = {c for c in caught if c.endswith("Error") and c not in (
        "SyncguardError", "ImportError", "BrokenPipeError", "OSError", "ValueError",
        "AttributeError")}
    assert "SyncguardError" in caught and not ours, ours


def test_one_function_checks_budgets() -> None:
    """A sync budget is checked in one place (``gate.verdicts.budget_count``): no other module
    compares a ``max_syncs...`` value with 0 itself."""
    check = re.compile(r"max_syncs\w*\s*(<|>=|<=)\s*0\b|\bv\s*<\s*0\b.*max_syncs")
    owner = "syncguard.gate.verdicts"
    found = sorted(f"{m}:{i}" for m, path in MODULES.items() if m != owner
                   for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
                   if check.search(line))
    assert not found, found
    src = MODULES[owner].read_text(encoding="utf-8")
    assert "def budget_count(" in src
    users = [m for m, path in MODULES.items()
             if "budget_count" in path.read_text(encoding="utf-8") and m != owner]
    assert {"syncguard.cli.common", "syncguard.driving.scenario",
            "syncguard.pytest_plugin.settings"} <= set(users), users


def _device_name_lists(path: Path) -> List[int]:
    """Lines of ``path`` holding a literal tuple, list or set of two or more device names."""
    names = {"auto", "sim", "npu", "cuda", "cpu"}
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            vals = [e.value for e in node.elts if isinstance(e, ast.Constant)]
            if len(vals) == len(node.elts) >= 2 and set(vals) <= names:
                out.append(node.lineno)
    return out


#: the one owner of the device names, on the bottom floor: core, the lint, driving, the
#: renderers and the commands all import them from here
DEVICE_NAMES_OWNER = "syncguard.devicenames"


def _device_name_retyped(modules: Dict[str, Path]) -> List[str]:
    return sorted(f"{m}:{line}" for m, path in modules.items() if m != DEVICE_NAMES_OWNER
                  for line in _device_name_lists(path))


def test_one_module_defines_the_device_names() -> None:
    """The device names (``--device``, the accelerators, the lint's backends, the op models'
    device types) are written once, in a bottom module, with no exemption for any layer."""
    assert DEVICE_NAMES_OWNER in BOTTOM
    assert _device_name_lists(MODULES[DEVICE_NAMES_OWNER])
    found = _device_name_retyped(MODULES)
    assert not found, found


def test_the_device_name_check_sees_a_retyped_list(tmp_path: Path) -> None:
    src = tmp_path / "retyped.py"
    src.write_text("KINDS = ('cuda', 'npu')\n", encoding="utf-8")
    assert _device_name_retyped({"syncguard.core.retyped": src}) == [
        "syncguard.core.retyped:1"]


#: a module holds one concern; none is longer than this
MAX_LINES = 800


def _oversized(modules: Dict[str, Path]) -> List[str]:
    return sorted(f"{m} ({n} lines)" for m, path in modules.items()
                  if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES)


def test_no_module_is_longer_than_800_lines() -> None:
    found = _oversized(MODULES)
    assert not found, found


def test_the_length_check_sees_a_long_module(tmp_path: Path) -> None:
    src = tmp_path / "long.py"
    src.write_text("x = 1\n" * (MAX_LINES + 1), encoding="utf-8")
    assert _oversized({"syncguard.long": src}) == [f"syncguard.long ({MAX_LINES + 1} lines)"]


def test_the_layer_check_sees_an_upward_import() -> None:
    planted = {**GRAPH, "syncguard.core.planted": {"syncguard.cli.common"}}
    assert _upward(planted) == [
        "syncguard.core.planted (core) -> syncguard.cli.common (cli)"]


#: third-party modules a command that does not need them must not load: torch (seconds on a
#: 910B host with torch_npu), the optional plots, the model library, and pandas and numpy
#: (a tenth of a second each: the lint and ``--help`` stay light)
HEAVY = ("torch", "torch_npu", "matplotlib", "transformers", "pandas", "numpy")


def _top_level(mod: str) -> Tuple[Set[str], Set[str]]:
    """What importing ``mod`` runs at once (its imports outside functions, not under ``if
    TYPE_CHECKING:``): (the package's own modules, the :data:`HEAVY` roots)."""
    tree = ast.parse(MODULES[mod].read_text(encoding="utf-8"))
    skip = _type_checking_nodes(tree)
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            skip.update(id(n) for n in ast.walk(node))
    own: Set[str] = set()
    heavy: Set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skip or not isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        own |= _targets(mod, node)
        if isinstance(node, ast.Import):
            heavy.update(a.name.split(".")[0] for a in node.names)
        elif not node.level and node.module:
            heavy.add(node.module.split(".")[0])
    parts = mod.split(".")
    own.update(".".join(parts[:i]) for i in range(2, len(parts))
               if ".".join(parts[:i]) in MODULES)  # a module's packages run first
    own.discard(mod)
    return own, heavy & set(HEAVY)


def _loads_heavy() -> Dict[str, Set[str]]:
    """The :data:`HEAVY` modules importing each module loads, through its top-level imports."""
    top = {m: _top_level(m) for m in MODULES}
    out: Dict[str, Set[str]] = {}
    for m in MODULES:
        seen, todo, heavy = {m}, [m], set()
        while todo:
            v = todo.pop()
            heavy |= top[v][1]
            for w in top[v][0] - seen:
                seen.add(w)
                todo.append(w)
        out[m] = heavy
    return out


def _lazy_nodes(path: Path) -> List[ast.stmt]:
    """The import statements of ``path`` inside a function (``if TYPE_CHECKING:`` ones not)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = _type_checking_nodes(tree)
    out: List[ast.stmt] = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            out += [n for n in ast.walk(node) if isinstance(n, (ast.Import, ast.ImportFrom))
                    and id(n) not in skip and id(n) not in {id(x) for x in out}]
    return out


def _needless_lazy_imports() -> List[str]:
    """Imports of the package's own modules inside a function that load nothing heavy the
    importing module has not loaded already: they belong at the module's top."""
    heavy = _loads_heavy()
    out = []
    for m, path in MODULES.items():
        if m == "syncguard" or m.startswith("syncguard._boot"):
            continue  # the lazy facade, and the boot file every Python child runs
        for node in _lazy_nodes(path):
            for dep in sorted(_targets(m, node)):
                if dep != m and not heavy[dep] - heavy[m]:
                    out.append(f"{m}:{node.lineno} {dep}")
    return sorted(out)


def test_imports_sit_at_the_top_unless_they_load_something_heavy() -> None:
    """A dependency hidden inside a function is one a reader does not see: an import of the
    package's own module is lazy only where it keeps torch (or another of :data:`HEAVY`) from
    loading in a process that does not need it."""
    found = _needless_lazy_imports()
    assert not found, f"{len(found)} lazy imports: " + "; ".join(found)


def test_no_underscored_core_module_is_used_outside_core() -> None:
    """What other layers use of the core has a public name: no ``core._x`` module imported
    from outside ``syncguard.core``."""
    private = {m for m in MODULES if m.startswith("syncguard.core.")
               and m.rsplit(".", 1)[-1].startswith("_")}
    bad = sorted(f"{m} -> {d}" for m, deps in GRAPH.items() if not m.startswith("syncguard.core")
                 for d in deps if d in private)
    assert not bad, bad


def test_one_writer_of_ci_annotations() -> None:
    """GitHub workflow commands and SARIF logs are written in one module
    (``renderers/annotations.py``) for the runtime gate and the lint alike."""
    owner = "syncguard.renderers.annotations"
    marks = re.compile(r"""^[^#]*f?["']::\{?(error|warning|notice|level)|sarif-schema|"2\.1\.0\"""")
    found = sorted(f"{m}:{i}" for m, path in MODULES.items() if m != owner
                   for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
                   if marks.search(line))
    assert not found, found
    assert marks.search(MODULES[owner].read_text(encoding="utf-8"))


def test_every_package_ships_in_the_wheel() -> None:
    """``[tool.setuptools] packages`` lists packages one by one: a package left out is missing
    from the installed wheel (an editable install still finds it, so only this test would)."""
    try:
        import tomllib
    except ImportError:  # Python < 3.11
        import tomli as tomllib  # type: ignore[no-redef]

    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
                 ["tool"]["setuptools"]["packages"])
    found = {".".join(p.parent.relative_to(ROOT).parts)
             for p in (ROOT / PKG).rglob("__init__.py")}
    assert found <= listed, sorted(found - listed)
