"""Driving a device: device resolution, config, scenario files, the subject protocol, pinned
staging, the decode loop, the counted pass (runner), the timed pass (timing), the calibration of
the device model and the native cross-check. See docs/architecture.md."""
