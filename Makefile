# The two commands of the README: `make run` and `make test` (both set up first).
SHELL := /bin/bash
.PHONY: setup run test bench clean paper sim

setup:
	@bash scripts/setup.sh

run: setup
	@source scripts/env.sh && robot-memory demo

test: setup
	@source scripts/env.sh && python -m pytest

bench: setup
	@source scripts/env.sh && python -m bench.run_all

clean:
	rm -rf .venv .ros_ws .ros_ws.build.log

# The validation of "Episodic-to-Semantic Consolidation Without Identity Drift" with our code.
paper: setup
	@source scripts/env.sh && python -m bench.paper

# The closed loop in a physics simulator (MuJoCo, headless): with and without memory.
sim: setup
	@source scripts/env.sh && python -m robot_memory.sim --out bench/results
