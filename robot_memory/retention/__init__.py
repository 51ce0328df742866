"""Retention: what the live store sheds and keeps bounded.

Compaction of consolidated history into sealed archive segments (compaction.py), the
segments' format and reading them back (segments.py, archives.py), and the
runaway-growth guard (growth.py).
"""
