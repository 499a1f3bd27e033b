"""A Python worker started with subprocess (its own interpreter, not multiprocessing). It
imports torch_npu first, as NPU scripts do: on --device sim the stand-in must exist before
torch is imported."""
# ruff: noqa: I001

import sys

import torch_npu  # noqa: F401

import tinyloop

tinyloop.decode("npu", "--clean" not in sys.argv)
