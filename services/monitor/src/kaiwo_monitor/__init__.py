"""The monitor: GPU utilization and the underutilized and idle stretches it finds, published
for the planner, which decides (the monitor changes nothing)."""
