"""What the planner knows: the projection of observed objects, the cluster state read from it,
and the settings parsed from it."""
