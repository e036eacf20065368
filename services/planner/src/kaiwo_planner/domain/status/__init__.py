"""Owner status and conditions, the public workload events, and the monitor's findings as
planning inputs."""
