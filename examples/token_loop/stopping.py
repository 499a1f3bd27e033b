"""A stop condition as generation libraries write them: a small callable the loop asks after
every token."""


class StopOnToken:
    def __init__(self, stop_id):
        self.stop_id = stop_id

    def __call__(self, next_ids):
        """True when every sequence produced ``stop_id``."""
        done = (next_ids == self.stop_id).all()
        return bool(done)  # the per-token hidden sync: Python reads a device bool
