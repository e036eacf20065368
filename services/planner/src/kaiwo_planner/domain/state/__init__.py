"""The ground of the planner's domain: the projection of observed objects, the facts taken in
beside them (the monitor's findings, the autoscaler's decisions, a workload's identity) and the
immutable cluster state read from it. Imports nothing of the domain above it."""
