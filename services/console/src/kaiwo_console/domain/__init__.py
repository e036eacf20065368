"""The console's decisions, pure: when a pending workload will start, what a page shows.

Nothing here does I/O (import-linter: ``console-domain-is-pure``); the HTTP, NATS and event
store adapters around it pass every input in, ``now`` included.
"""
