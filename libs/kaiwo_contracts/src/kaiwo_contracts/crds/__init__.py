"""Pydantic models of the custom resources the operator serves, and CRD schema generation."""
