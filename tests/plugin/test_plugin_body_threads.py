"""The plugin counts the test body's own threads and the threads it starts, not a thread a
fixture started before the body (a module-scoped server or prefetcher reading tensors in the
background)."""

from __future__ import annotations

import pytest

QUIET = ("-p", "no:cacheprovider", "-p", "no:benchmark", "-p", "no:hypothesispytest")


def test_a_module_fixtures_background_thread_is_not_the_test_body(
        pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_bg='''
        import threading
        import time

        import pytest
        import torch

        x = torch.arange(4)


        @pytest.fixture(scope="module")
        def background():
            stop, reads = threading.Event(), [0]

            def work():
                while not stop.is_set():
                    x.sum().item()
                    reads[0] += 1
                    time.sleep(0.001)

            t = threading.Thread(target=work, daemon=True)
            t.start()
            yield reads
            stop.set()
            t.join()


        @pytest.mark.syncguard(devices=("cpu",), max_syncs=1)
        def test_body(background):
            first = background[0]
            deadline = time.monotonic() + 60
            while background[0] < first + 5 and time.monotonic() < deadline:
                time.sleep(0.001)  # the fixture's thread reads during the body
            assert background[0] >= first + 5
            x.sum().item()  # the body's read
            t = threading.Thread(target=lambda: x.sum().item())  # a thread it starts
            t.start()
            t.join()


        def test_thread_start_is_threadings_own_again():
            assert threading.Thread.start.__qualname__ == "Thread.start"
    ''')
    result = pytester.runpytest_subprocess("-v", *QUIET)
    result.assert_outcomes(failed=1, passed=1)
    result.stdout.fnmatch_lines(["syncguard: allowed 1 host sync, saw 2 in the test body*"])
