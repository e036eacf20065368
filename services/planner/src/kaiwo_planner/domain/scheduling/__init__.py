"""GPU allocation, schedulability, and preemption (by duration and by GPU idleness)."""
