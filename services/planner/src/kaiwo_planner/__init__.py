"""The planner: pure decisions (children, status, queues, preemption) and the service that runs them."""
