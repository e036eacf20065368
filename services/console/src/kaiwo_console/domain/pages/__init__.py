"""The console's pages as HTML with inline SVG plots: pure functions of view rows (decision 0051).

No frontend build: each page is rendered on the server, styled by one small stylesheet, and
kept current by a few lines of script that listen to ``/events`` (server-sent events) and,
when the state changed, fetch the same page again and swap its ``<main>``. Every value from
the cluster is escaped.

One module per page (``workloads``, ``queues``, ``nodes``, ``models``), the frame they share
(``frame``) and the few formats several pages use (``format``).
"""
