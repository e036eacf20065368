"""Contracts of the Kaiwo operator: API models of every served kind and the event contracts.

This package does no I/O and imports nothing but pydantic (enforced by import-linter).
"""
