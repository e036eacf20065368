"""The planner: pure decisions (children, status, queues, preemption) and their service."""
