"""Settings parsed from the cluster state (KaiwoConfig, KaiwoQueueConfig, AIMNamespaceConfigs)
and the inputs the planners read from a workload: the layer above the ground (``state``)."""
