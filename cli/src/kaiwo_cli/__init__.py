"""The kaiwo command."""
