"""The whole operator as deployed (separate processes over a real nats-server, a real event
store, the fake API server), and the controllers it relies on played by the tests."""
