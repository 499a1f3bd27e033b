"""Exit codes and the usage error: the bottom of the package, so that the engine (``execute``,
the runner, the gate) reports outcomes without importing the command line that prints them.

Exit codes are API: 0 clean, 1 syncs over budget, 2 usage or bad input, 3 internal error; 130
when interrupted (Ctrl-C), 143 when terminated (SIGTERM), 141 when the reader of stdout went
away (``syncguard show X | head``).
"""

from __future__ import annotations

EXIT_OK, EXIT_OVER, EXIT_USAGE, EXIT_INTERNAL, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
EXIT_TERMINATED, EXIT_BROKEN_PIPE = 143, 141


class UsageError(Exception):
    """Bad input: one line on stderr, exit code 2."""
