"""The glass_cup grasp example of "Episodic-to-Semantic Consolidation Without
Identity Drift", run end to end (`robot-memory demo`, `make run`)."""
