"""A fake Kubernetes API server over HTTP, for tests and benchmarks."""
