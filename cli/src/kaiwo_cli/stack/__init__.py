"""The local stack behind ``kaiwo up``: NATS, the event store and every service on one machine."""
