"""The recorder: a durable consumer of every subject, appending each message to the event store.

``python -m kaiwo_recorder`` runs it; :class:`kaiwo_recorder.service.RecorderService` is the core.
"""
