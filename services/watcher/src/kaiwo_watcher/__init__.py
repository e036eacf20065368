"""The watcher: lists and watches the cluster and publishes observed events."""
