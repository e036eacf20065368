"""Programs the planner's plans ship into Pods (standard library only; never imported by the
planner itself, only read as text)."""
