"""Grounding: what the planner is served.

The in-memory fact index and its abstentions (index.py), the request and answer
(request.py), analogies for unseen targets, fleet priors, explanations, the
consultation audit, request limits and the lost-delta watch.

Until this release the index was the module `robot_memory.grounding`; its public names
(`GroundingIndex`, `SKILL_FACT_KINDS`, `DEFAULT_MAX_RESULTS`, `DEFAULT_ANALOGY_SETTINGS`)
still resolve here, for one release, with a DeprecationWarning naming their new module.
They load on first use, so importing a sibling module does not build the index's imports.
"""

from __future__ import annotations

import importlib
import warnings
from typing import Any

# The old module's public names: kept one release (CHANGELOG, "Moved modules").
_MOVED = {"GroundingIndex": "robot_memory.grounding.index",
          "SKILL_FACT_KINDS": "robot_memory.grounding.index",
          "DEFAULT_MAX_RESULTS": "robot_memory.grounding.index",
          "DEFAULT_ANALOGY_SETTINGS": "robot_memory.grounding.index"}


def __getattr__(name: str) -> Any:
    module = _MOVED.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    warnings.warn(f"robot_memory.grounding.{name} moved to {module}.{name}; the old name "
                  "goes in the next release", DeprecationWarning, stacklevel=2)
    return getattr(importlib.import_module(module), name)
