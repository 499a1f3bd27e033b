"""A script whose step is its own function: `--step selfloop:decode_step` (or
`__main__:Loop.run_one`). The loop is at the top level, right below the definitions."""

import sys

from loopdemo.engine import Engine


def decode_step(engine, i):
    return engine.step(i)


class Loop:
    @staticmethod
    def run_one(engine, i):
        return decode_step(engine, i)


engine = Engine("npu")
for i in range(6):
    if "--static" in sys.argv:
        Loop.run_one(engine, i)
    else:
        decode_step(engine, i)
if "--fail" in sys.argv:
    raise ValueError("selfloop failed")
