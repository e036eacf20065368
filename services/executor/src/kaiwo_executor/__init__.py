"""The executor: applies plans to the Kubernetes API idempotently and publishes results."""
