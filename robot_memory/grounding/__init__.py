"""Grounding: what the planner is served.

The in-memory fact index and its abstentions (index.py), the request and answer
(request.py), what a served fact carries beside its value (served.py), analogies for
unseen targets, fleet priors, explanations, the consultation audit, request limits and
the lost-delta watch.
"""
