"""A Python worker started with subprocess (its own interpreter, not multiprocessing)."""

import sys

import torch_npu  # noqa: F401

import tinyloop

tinyloop.decode("npu", "--clean" not in sys.argv)
