"""The device model: the modeled timeline and its profiles, and the native ground truth it is
checked against. See docs/architecture.md."""
