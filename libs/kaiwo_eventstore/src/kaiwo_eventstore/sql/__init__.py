"""SQLAlchemy 2 async adapter of the event store (SQLite via aiosqlite, PostgreSQL via asyncpg)."""
