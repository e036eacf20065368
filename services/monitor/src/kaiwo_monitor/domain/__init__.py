"""The monitor's decisions: pure functions of samples, pods, configuration, state and ``now``.

Nothing here does I/O or reads a clock (checked by import-linter).
"""
