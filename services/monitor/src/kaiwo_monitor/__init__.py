"""The monitor: utilization and preemption findings from the metrics endpoint."""
