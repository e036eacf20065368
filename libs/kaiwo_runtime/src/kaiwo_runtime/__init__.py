"""What every service shares at run time: the NATS bus adapter, logging, metrics and health endpoints."""
