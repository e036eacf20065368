"""kaiwo-console: a read-only web console (issue 27, decisions 0050 and 0051)."""
