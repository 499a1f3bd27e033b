"""syncguard ``exec`` follows the program's processes: a Python process it starts finds this
folder first on ``PYTHONPATH`` (only while ``SYNCGUARD_FOLLOW`` is set), is guarded from its
start (:func:`syncguard.execute.follow.boot`), and then runs the ``sitecustomize`` this file
shadows, if there is one. Nothing here may break the program: a failure is one line on stderr.
"""


def _boot() -> None:
    import os
    import sys

    here = os.path.dirname(os.path.abspath(__file__))
    if os.environ.get("SYNCGUARD_FOLLOW"):
        try:
            import importlib

            importlib.import_module("syncguard.execute.follow").boot()
        except Exception as exc:  # another interpreter without syncguard, say
            print(f"syncguard: warning: process {os.getpid()} is not guarded: "
                  f"{type(exc).__name__}: {exc}", file=sys.stderr)
    # the sitecustomize this one shadows (a distribution's, a site's), run as Python would
    import importlib.machinery
    import importlib.util

    path = [p for p in sys.path if os.path.abspath(p or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is None or spec.loader is None:
        return
    mod = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = mod
    try:
        spec.loader.exec_module(mod)
    except Exception as exc:
        print(f"Error in sitecustomize; set PYTHONVERBOSE for traceback:\n"
              f"{type(exc).__name__}: {exc}", file=sys.stderr)


_boot()
del _boot
