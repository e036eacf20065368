"""When will a pending workload start: the estimate (decision 0050) and its inputs read from
Kueue's objects (decision 0055), shared by the console, the CLI and the planner."""
