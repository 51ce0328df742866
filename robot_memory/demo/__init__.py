"""The seed's glass_cup example, run end to end (`robot-memory demo`, `make run`)."""
