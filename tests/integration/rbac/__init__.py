"""The operator under its own RBAC (deploy/k8s/base/rbac.yaml) on a real API server."""
