"""The sync APIs: one table read by the interceptors (what to patch) and by ``syncguard lint``
(what to flag), so an API added here is both caught at run time and flagged in source.

Torch-free: the lint imports it without importing torch. Each :class:`SyncApi` names the
Python entry (``Tensor.<name>`` method and/or ``torch.<name>`` function), the interceptor
family that classifies it at run time (``classify``), the lint rule that flags it, the event
kind and ATen op it reports, and why it syncs (the lint's message and SARIF help text).

``tests/lint/test_lint_catalogue.py`` checks both directions: every entry is patched by
:mod:`syncguard.core.intercept` and flagged by the lint, and every patched API is in this table.
"""

from __future__ import annotations

import dataclasses
from typing import Dict, List, Optional, Tuple


@dataclasses.dataclass(frozen=True)
class SyncApi:
    """One Python-level API that can make the host wait for the device."""

    #: attribute name as called: ``nonzero`` for ``x.nonzero()`` / ``torch.nonzero(x)``
    name: str
    #: where it lives: ``Tensor`` (a method), ``torch``, ``torch.nn.functional``,
    #: ``torch.cuda``, ``torch.npu``, ``Stream``, ``Event``
    owners: Tuple[str, ...]
    #: the interceptor family that classifies a call (``scalar``, ``data_dep``, ``d2h``,
    #: ``special``: a classifier of its own in :mod:`syncguard.core.intercept`)
    classify: str
    #: lint rule id (:data:`RULES`)
    rule: str
    #: event kind (:data:`syncguard.core.events.KINDS`)
    kind: str
    #: ATen op where one is known
    op: Optional[str]
    #: why it syncs, in a few words
    why: str
    #: the argument whose presence makes the call sync-free (``output_size``...), if any
    unless_kwarg: Optional[str] = None


@dataclasses.dataclass(frozen=True)
class Rule:
    """A lint rule: its id, short name and help text (SARIF ``shortDescription`` and
    ``help``)."""

    id: str
    name: str
    short: str
    help: str


RULES: Dict[str, Rule] = {r.id: r for r in (
    Rule("SG101", "tensor-condition", "A tensor used as a truth value",
         "if/while/assert/and/or/not or a comparison read as a Python bool on a device tensor "
         "copies one scalar to the host and waits for every queued kernel "
         "(Tensor.__bool__ -> aten::_local_scalar_dense). Keep the decision on the device "
         "(torch.where, masks) or read it once per step where a readback already happens."),
    Rule("SG102", "scalar-conversion", "A device tensor converted to a Python scalar",
         "int()/float()/bool()/range()/indexing a list with a device tensor reads one scalar "
         "on the host (aten::_local_scalar_dense): the host waits for the device. "
         "torch.tensor([t0, t1]) of 0-d device tensors reads each element so (then uploads "
         "the values with device=): torch.stack keeps them on the device."),
    Rule("SG103", "item", "Tensor.item() on a device tensor",
         ".item() copies one scalar to the host and waits for the device queue to drain."),
    Rule("SG201", "device-to-host", "A device-to-host copy",
         ".tolist()/.cpu()/.to('cpu')/.numpy()/copy_ into a host buffer copy device data to "
         "the host; without non_blocking into pinned memory the host waits."),
    Rule("SG301", "data-dependent-shape", "An op whose output shape depends on device data",
         "nonzero/argwhere/torch.where(cond)/unique/masked_select/bincount/boolean-mask "
         "indexing/repeat_interleave without output_size/one_hot without num_classes must "
         "read a count on the host to size the output (x[mask] = v too: on NPU even for a "
         "Python number v). Pass the size (output_size, "
         "num_classes) or keep a fixed-shape form (torch.where(c, x, y), masked_fill)."),
    Rule("SG302", "bool-result", "An op that returns a Python bool from device data",
         "torch.equal/torch.allclose return a Python bool: the host waits for the result."),
    Rule("SG401", "host-to-device", "A blocking host-to-device copy",
         "torch.tensor(host values, device=dev), .to(dev) of a pageable host tensor and a "
         "host index tensor into a device tensor copy host memory to the device; the host "
         "waits unless the source is pinned and non_blocking=True. On CUDA a Python number "
         "written into a 0-d destination (x[0] = 0 of a 1-d x) or through an index tensor "
         "(x[idx] = 0) is copied from the host too; a slice or a row of a 2-d x is a fill_."),
    Rule("SG501", "print-tensor", "A device tensor printed or formatted",
         "print()/str()/repr()/f-strings of a device tensor copy it to the host to format it."),
    Rule("SG601", "explicit-sync", "An explicit synchronize()",
         "torch.<dev>.synchronize(), Stream.synchronize() and Event.synchronize() block the "
         "host until the device is done."),
    Rule("SG701", "in-kernel-read", "A kernel that reads device data on the host",
         "The C++ kernel calls .item() itself (multinomial's checks on CUDA, masked_fill_ with "
         "a 0-d device tensor value, normal with a tensor std): no Python line shows it."),
)}


def _t(*names: str) -> Tuple[str, ...]:
    return names


APIS: List[SyncApi] = [
    # scalar reads
    SyncApi("__bool__", _t("Tensor"), "scalar", "SG101", "scalar_read",
            "aten::_local_scalar_dense", "a truth value read on the host"),
    SyncApi("item", _t("Tensor"), "scalar", "SG103", "scalar_read",
            "aten::_local_scalar_dense", "reads one scalar on the host"),
    SyncApi("__int__", _t("Tensor"), "scalar", "SG102", "scalar_read",
            "aten::_local_scalar_dense", "int() reads one scalar on the host"),
    SyncApi("__float__", _t("Tensor"), "scalar", "SG102", "scalar_read",
            "aten::_local_scalar_dense", "float() reads one scalar on the host"),
    SyncApi("__index__", _t("Tensor"), "scalar", "SG102", "scalar_read",
            "aten::_local_scalar_dense", "used as an index/range bound: one scalar read"),
    SyncApi("__complex__", _t("Tensor"), "scalar", "SG102", "scalar_read",
            "aten::_local_scalar_dense", "complex() reads one scalar on the host"),
    # device-to-host copies
    SyncApi("tolist", _t("Tensor"), "d2h", "SG201", "d2h_copy", "aten::_to_copy",
            "copies the tensor to a Python list on the host"),
    SyncApi("cpu", _t("Tensor"), "special", "SG201", "d2h_copy", "aten::_to_copy",
            "copies the tensor to host memory (blocking)"),
    SyncApi("numpy", _t("Tensor"), "special", "SG201", "d2h_copy", "aten::_to_copy",
            "copies the tensor to a host numpy array"),
    SyncApi("copy_", _t("Tensor",), "special", "SG201", "d2h_copy", "aten::copy_",
            "a device tensor copied into a host buffer"),
    SyncApi("to", _t("Tensor",), "special", "SG201", "d2h_copy", "aten::_to_copy",
            ".to('cpu') copies device data to the host; .to(dev) of a host tensor copies it "
            "to the device"),
    SyncApi("__contains__", _t("Tensor",), "special", "SG101", "scalar_read",
            "aten::_local_scalar_dense", "`x in t` compares on the device and reads a bool"),
    # printing
    SyncApi("__repr__", _t("Tensor",), "special", "SG501", "d2h_copy", "aten::_to_copy",
            "printing copies the tensor to the host"),
    SyncApi("__format__", _t("Tensor",), "special", "SG501", "scalar_read",
            "aten::_local_scalar_dense", "formatting reads the value on the host"),
    # host-to-device copies
    SyncApi("tensor", _t("torch",), "special", "SG401", "h2d_copy", "aten::_to_copy",
            "host values copied to the device (blocking); a list of device tensors is read "
            "element by element first"),
    SyncApi("as_tensor", _t("torch",), "special", "SG401", "h2d_copy", "aten::_to_copy",
            "host values copied to the device (blocking)"),
    SyncApi("cuda", _t("Tensor",), "special", "SG401", "h2d_copy", "aten::_to_copy",
            "a host tensor copied to the device (blocking)"),
    SyncApi("npu", _t("Tensor",), "special", "SG401", "h2d_copy", "aten::_to_copy",
            "a host tensor copied to the device (blocking)"),
    # indexing
    SyncApi("__getitem__", _t("Tensor",), "special", "SG301", "data_dependent",
            "aten::index.Tensor", "a boolean mask index is nonzero; a host index tensor is "
            "copied to the device"),
    SyncApi("__setitem__", _t("Tensor",), "special", "SG301", "data_dependent",
            "aten::index_put_", "a boolean mask reads the mask (with a device tensor value; "
            "on NPU with a Python number too); on CUDA a Python number written into a 0-d "
            "destination or through an index tensor is copied from the host"),
    SyncApi("index_put_", _t("Tensor",), "special", "SG301", "data_dependent",
            "aten::index_put_", "a boolean mask index reads the mask on the host"),
    SyncApi("index_put", _t("Tensor",), "special", "SG301", "data_dependent",
            "aten::index_put_", "a boolean mask index reads the mask on the host"),
    # data-dependent output shape / Python results
    SyncApi("nonzero", _t("Tensor", "torch"), "data_dep", "SG301", "data_dependent",
            "aten::nonzero", "output size depends on device data"),
    SyncApi("argwhere", _t("Tensor", "torch"), "data_dep", "SG301", "data_dependent",
            "aten::argwhere", "output size depends on device data"),
    SyncApi("masked_select", _t("Tensor", "torch"), "data_dep", "SG301", "data_dependent",
            "aten::masked_select", "output size depends on the mask"),
    SyncApi("unique", _t("Tensor", "torch"), "data_dep", "SG301", "data_dependent",
            "aten::_unique2", "output size depends on device data"),
    SyncApi("unique_consecutive", _t("Tensor", "torch"), "data_dep", "SG301",
            "data_dependent", "aten::unique_consecutive", "output size depends on device data"),
    SyncApi("bincount", _t("Tensor", "torch"), "data_dep", "SG301", "data_dependent",
            "aten::bincount", "output size depends on the largest value"),
    SyncApi("equal", _t("Tensor", "torch"), "data_dep", "SG302", "data_dependent",
            "aten::equal", "returns a Python bool computed on the device"),
    SyncApi("allclose", _t("Tensor", "torch"), "data_dep", "SG302", "data_dependent",
            "aten::allclose", "returns a Python bool computed on the device"),
    SyncApi("where", _t("torch",), "special", "SG301", "data_dependent", "aten::nonzero",
            "torch.where(cond) with one argument is nonzero"),
    SyncApi("repeat_interleave", _t("Tensor", "torch"), "special", "SG301", "data_dependent",
            "aten::repeat_interleave.Tensor", "output size is the sum of the repeats",
            unless_kwarg="output_size"),
    SyncApi("one_hot", _t("torch.nn.functional",), "special", "SG301", "data_dependent",
            "aten::one_hot", "num_classes inferred with max().item()",
            unless_kwarg="num_classes"),
    # in-kernel reads (op sync models)
    SyncApi("multinomial", _t("Tensor", "torch"), "special", "SG701", "in_kernel",
            "aten::multinomial", "CUDA kernel checks the probabilities with two .item() calls"),
    SyncApi("masked_fill_", _t("Tensor",), "special", "SG701", "in_kernel",
            "aten::masked_fill_.Tensor", "a 0-d device tensor value is read with .item()"),
    SyncApi("masked_fill", _t("Tensor", "torch"), "special", "SG701", "in_kernel",
            "aten::masked_fill_.Tensor", "a 0-d device tensor value is read with .item()"),
    SyncApi("normal", _t("torch",), "special", "SG701", "in_kernel",
            "aten::normal.Tensor_Tensor", "checks std >= 0 on the host"),
    # explicit
    SyncApi("synchronize", _t("torch.cuda", "torch.npu", "Stream", "Event"), "special",
            "SG601", "explicit_sync", None, "blocks the host until the device is idle"),
]


def by_classify(family: str) -> List[SyncApi]:
    """The entries an interceptor family classifies (``scalar``, ``data_dep``, ``d2h``)."""
    return [a for a in APIS if a.classify == family]


def by_name() -> Dict[str, List[SyncApi]]:
    """Entries by attribute name (several owners share one name)."""
    out: Dict[str, List[SyncApi]] = {}
    for a in APIS:
        out.setdefault(a.name, []).append(a)
    return out
