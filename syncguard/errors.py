"""Exit codes and the usage error: the bottom of the package, so that the engine (``execute``,
the runner, the gate) reports outcomes without importing the command line that prints them.

Exit codes are API: 0 clean, 1 syncs over budget, 2 usage or bad input, 3 internal error; 130
when interrupted (Ctrl-C), 143 when terminated (SIGTERM), 141 when the reader of stdout went
away (``syncguard show X | head``).
"""

from __future__ import annotations

EXIT_OK, EXIT_OVER, EXIT_USAGE, EXIT_INTERNAL, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
EXIT_TERMINATED, EXIT_BROKEN_PIPE = 143, 141


class SyncguardError(Exception):
    """The root of every error syncguard raises on purpose: the command line catches this one
    class, prints its message as one line on stderr and exits with :attr:`exit_code`.

    The subclasses live beside the code that raises them and keep a built-in base too
    (``ValueError`` for bad input, ``RuntimeError`` for a state), so that ``except ValueError``
    in a user's code still catches them."""

    exit_code: int = EXIT_USAGE


class UsageError(SyncguardError):
    """Bad input: one line on stderr, exit code 2."""


class ResultWarning(UserWarning):
    """A result file that loads but may be read wrongly (written by a newer syncguard). Here
    (and named in :mod:`syncguard.results.format`) so that the command line can show it
    without importing the result format, which ``syncguard lint`` never reads."""
