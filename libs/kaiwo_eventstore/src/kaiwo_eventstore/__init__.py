"""Append-only SQL event store (SQLAlchemy 2 async; SQLite embedded, PostgreSQL in production)."""
