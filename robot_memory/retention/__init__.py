"""Retention: what the live store sheds and keeps bounded.

Compaction of consolidated history into sealed archive segments (compaction.py), the
segments' format and reading them back (segments.py, archives.py), the
runaway-growth guard (growth.py), and the disk budget over the store's files and the
segments together (budget.py).
"""
