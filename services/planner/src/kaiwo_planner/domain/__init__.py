"""Pure planning decisions: no I/O, no clock (``now`` is a parameter), deterministic output."""
