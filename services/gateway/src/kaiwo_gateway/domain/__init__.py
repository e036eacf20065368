"""The gateway's decisions, pure: which Models and endpoints exist, which one serves a request.

Nothing here does I/O (import-linter: ``gateway-domain-is-pure``); the HTTP and NATS adapters
around it pass every input in.
"""
