"""KaiwoQueueConfig: node pools, the Kueue objects, and the default cluster singletons."""
