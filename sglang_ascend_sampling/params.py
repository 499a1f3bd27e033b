"""Per-request sampling parameters, normalised and validated the way SGLang does it.

``TOP_K_ALL`` stands for "no top-k". ``top_k=None`` and ``top_k=-1`` both become ``TOP_K_ALL``.
A temperature in ``[0, 1e-6)`` means greedy decoding: the temperature becomes 1.0 and top_k 1.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Optional

#: The top_k value that means "keep the whole vocabulary".
TOP_K_ALL: int = 1 << 30

#: Temperatures below this (and >= 0) select greedy decoding.
GREEDY_TEMPERATURE_EPS: float = 1e-6

#: The largest top_k the fused ``npu_top_k_top_p`` operator accepts.
NPU_TOP_K_MAX: int = 1024

_INT64_MIN = -(1 << 63)
_INT64_MAX = (1 << 63) - 1


class SamplingParamsError(ValueError):
    """A sampling parameter is out of range; the message names the field and its value."""


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


@dataclasses.dataclass
class SamplingParams:
    """Sampling parameters of one request (normalised in ``__post_init__``).

    After construction ``top_k`` is an int >= 1 (``TOP_K_ALL`` for "no top-k") and a greedy
    request has ``temperature == 1.0`` and ``top_k == 1``.
    """

    temperature: float = 1.0
    top_p: float = 1.0
    top_k: Optional[int] = -1
    min_p: float = 0.0
    seed: Optional[int] = None

    def __post_init__(self) -> None:
        if not _is_number(self.temperature):
            raise SamplingParamsError(
                f"temperature must be a number, got {self.temperature!r}"
            )
        if not _is_number(self.top_p):
            raise SamplingParamsError(f"top_p must be a number, got {self.top_p!r}")
        if not _is_number(self.min_p):
            raise SamplingParamsError(f"min_p must be a number, got {self.min_p!r}")
        if self.top_k is not None and not _is_int(self.top_k):
            raise SamplingParamsError(
                f"top_k must be an int, -1 or None, got {self.top_k!r}"
            )
        if self.seed is not None and not _is_int(self.seed):
            raise SamplingParamsError(f"seed must be an int or None, got {self.seed!r}")

        self.temperature = float(self.temperature)
        self.top_p = float(self.top_p)
        self.min_p = float(self.min_p)

        # Normalisation (SGLang): None -> -1 -> TOP_K_ALL; near-zero temperature -> greedy.
        top_k = -1 if self.top_k is None else self.top_k
        if top_k == -1:
            top_k = TOP_K_ALL
        self.top_k = top_k
        if not self.temperature >= 0.0 or math.isinf(self.temperature):
            raise SamplingParamsError(
                f"temperature must be a finite number >= 0, got {self.temperature!r}"
            )
        if self.temperature < GREEDY_TEMPERATURE_EPS:
            self.temperature = 1.0
            self.top_k = 1

        # Validation.
        if self.top_k < 1:
            raise SamplingParamsError(
                f"top_k must be -1/None (no top-k) or >= 1, got {self.top_k!r}"
            )
        if not 0.0 < self.top_p <= 1.0:
            raise SamplingParamsError(f"top_p must be in (0, 1], got {self.top_p!r}")
        if not 0.0 <= self.min_p <= 1.0:
            raise SamplingParamsError(f"min_p must be in [0, 1], got {self.min_p!r}")
        if self.seed is not None and not _INT64_MIN <= self.seed <= _INT64_MAX:
            raise SamplingParamsError(f"seed must fit in int64, got {self.seed!r}")

    @property
    def top_k_int(self) -> int:
        """``top_k`` as a plain int (always set after normalisation)."""
        assert self.top_k is not None
        return self.top_k

    @property
    def is_greedy(self) -> bool:
        """True for a greedy request (``top_k <= 1``)."""
        return self.top_k_int <= 1

    @property
    def npu_top_k_top_p_eligible(self) -> bool:
        """True when the fused operator's top_k contract ``1 <= top_k <= 1024`` holds."""
        return 1 <= self.top_k_int <= NPU_TOP_K_MAX
