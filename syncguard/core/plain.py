"""Plain op arguments: the values an ATen op takes that hold no tensor (numbers, strings,
dtypes, devices, layouts, memory formats, and lists or tuples of them). The simulated device
and the modeled timeline key an op's cost by its tensors alone when every other argument is
plain."""

from __future__ import annotations

from typing import Any

import torch

#: The types of a plain argument.
PLAIN = frozenset({int, float, bool, complex, str, type(None), torch.dtype, torch.device,
                   torch.layout, torch.memory_format})


def is_plain(a: Any) -> bool:
    """Whether ``a`` holds no tensor: a plain value, or a list or tuple of them (sizes,
    dims)."""
    if type(a) in PLAIN:
        return True
    if type(a) is list or type(a) is tuple:
        for x in a:
            if type(x) not in PLAIN:
                return False
        return True
    return False
