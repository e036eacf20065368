"""The Kubernetes port of the operator and its kubernetes_asyncio adapter."""
