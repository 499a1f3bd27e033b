"""Where a line runs: serving code, a test, a benchmark or a script, and whether a function is a
device kernel (Triton, CuTe, TileLang...) whose body is no host code at all.

A sync in a test or a benchmark is real but costs no user anything, so such findings carry a
``context`` and do not fail CI unless asked (``--include-tests``). A kernel body is traced and
compiled for the device: ``if is_greedy:`` there is a compile-time branch, not a host read.
"""

from __future__ import annotations

import ast
import re
from typing import Dict, Optional, Set

SERVING, TEST, BENCHMARK, SCRIPT = "serving", "test", "benchmark", "script"

_TEST_DIRS = frozenset({"test", "tests", "testing", "unittest", "unittests", "unit_tests"})
_BENCH_DIRS = frozenset({"benchmark", "benchmarks", "bench", "benches", "perf"})
_TEST_FILE = re.compile(r"^(?:test_.*|.*_test|tests?|conftest)\.py$")
_BENCH_FILE = re.compile(r"^(?:bench(?:mark)?(?:s)?_.*|.*_bench(?:mark)?|bench(?:mark)?s?)\.py$")
_TEST_FUNC = re.compile(r"^test(?:_|$)")
_BENCH_FUNC = re.compile(r"^(?:bench(?:mark)?(?:_|$)|.*_bench(?:mark)?$)")
_TEST_CLASS = re.compile(r"^Test[A-Z_]|.*Test(?:s|Case)?$")
_BENCH_CLASS = re.compile(r"^Bench(?:mark)?|.*Benchmark$")


def file_context(path: str) -> str:
    """The context of a whole file from its path: a test file (``test_*.py``, ``*_test.py``,
    ``conftest.py``, under ``tests/``), a benchmark (``bench_*.py``, under ``benchmarks/``),
    else serving code."""
    parts = path.replace("\\", "/").split("/")
    name = parts[-1].lower()
    dirs = {p.lower() for p in parts[:-1]}
    if _TEST_FILE.match(name) or dirs & _TEST_DIRS:
        return TEST
    if _BENCH_FILE.match(name) or dirs & _BENCH_DIRS:
        return BENCHMARK
    return SERVING


def function_context(name: str, outer: str) -> str:
    """The context of a function (or class) called ``name`` inside code of context ``outer``:
    a test or benchmark by its name; otherwise what encloses it."""
    if outer != SERVING:
        return outer
    if _TEST_FUNC.match(name):
        return TEST
    if _BENCH_FUNC.match(name):
        return BENCHMARK
    return SERVING


def class_context(name: str, outer: str) -> str:
    if outer != SERVING:
        return outer
    if _TEST_CLASS.match(name):
        return TEST
    if _BENCH_CLASS.match(name):
        return BENCHMARK
    return SERVING


def is_main_guard(test: ast.expr) -> bool:
    """``__name__ == "__main__"`` (either side)."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1
            and isinstance(test.ops[0], ast.Eq)):
        return False
    sides = [test.left, test.comparators[0]]
    return any(isinstance(s, ast.Name) and s.id == "__name__" for s in sides) and any(
        isinstance(s, ast.Constant) and s.value == "__main__" for s in sides)


def script_functions(tree: ast.Module) -> Set[str]:
    """Module-level functions called from the ``if __name__ == "__main__":`` block: the
    script's own entry (``main()``), not serving code."""
    out: Set[str] = set()
    for s in tree.body:
        if isinstance(s, ast.If) and is_main_guard(s.test):
            for n in ast.walk(s):
                if isinstance(n, ast.Call) and isinstance(n.func, ast.Name):
                    out.add(n.func.id)
    return out


#: modules whose decorators compile a function for the device
_KERNEL_MODULES = ("triton", "tilelang", "tvm", "cutlass", "cute", "numba", "helion", "warp",
                   "cuda", "cupy", "pallas", "jax.experimental.pallas", "thunderkittens", "tk",
                   "cuda.tile", "ninetoothed", "flag_gems", "tl", "T", "wp", "ct")
#: the last part of a kernel decorator's name
_KERNEL_LAST = frozenset({"jit", "autotune", "heuristics", "kernel", "prim_func", "macro",
                          "njit", "func", "inline", "device_function", "libentry"})


def is_kernel_decorator(dec: ast.expr, names: Dict[str, str]) -> bool:
    """``dec`` (a decorator) compiles its function for the device: ``@triton.jit``,
    ``@triton.autotune(...)``, ``@cute.kernel``, ``@T.prim_func``, ``@tilelang.jit``, a bare
    ``@jit`` imported from one of them. ``names`` maps local names to what they import."""
    node = dec.func if isinstance(dec, ast.Call) else dec
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return False
    parts.append(node.id)
    parts.reverse()
    full = ".".join([names.get(parts[0], parts[0]), *parts[1:]])
    last = parts[-1]
    if last not in _KERNEL_LAST:
        return False
    if len(parts) == 1:
        origin: Optional[str] = names.get(last)
        return origin is not None and origin.split(".")[0] in _KERNEL_MODULES
    return full.split(".")[0] in _KERNEL_MODULES or parts[0] in _KERNEL_MODULES
