"""kaiwo-gateway: one OpenAI-compatible endpoint in front of every KubeAI Model's servers."""
