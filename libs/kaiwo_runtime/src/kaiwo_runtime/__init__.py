"""What every service shares at run time: NATS bus adapter, logging, metrics, health."""
