"""The device names, written once: the ``--device`` choices, the accelerators (each with an op
model, a calibrated profile and a lint backend), and the groups every command, the plugin, the
core and the lint take theirs from. Which device a run uses is decided in
``driving/devices.py``; this module only names them."""

#: ``--device`` of ``run``, ``check``, ``exec`` and ``selftest``
DEVICES = ("auto", "sim", "npu", "cuda", "cpu")
#: the accelerators (real hardware; an op model, a calibrated profile and a lint backend each)
HARDWARE = ("cuda", "npu")
#: ``calibrate --device``: the simulated npu or an accelerator
CALIBRATE_DEVICES = ("sim", *HARDWARE)
#: the pytest marker's ``device`` (a test's own tensors) and ``model`` (whose op model counts)
MARKER_DEVICES = ("cpu", *HARDWARE)
#: the plugin's session-wide ``--syncguard-device`` / ``[tool.syncguard] device``
SESSION_DEVICES = ("sim", "auto")
#: kinds whose kernels run on the host's CPU (the simulated npu's are CPU ops)
HOST_KERNEL_KINDS = ("sim", "cpu")
#: kinds that may run on the real NPU (``auto`` picks it where it is usable)
NPU_KINDS = ("auto", "npu")
