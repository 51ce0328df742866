# The two commands of the README: `make run` and `make test` (both set up first).
# DISTRO=kilted (default, Python 3.11, .venv/) or DISTRO=jazzy (Python 3.12, .venv-jazzy/),
# e.g. `make test DISTRO=jazzy`. PYTEST_ARGS narrows a test run (CI uses it).
SHELL := /bin/bash
.PHONY: setup run test bench clean paper sim

# Set here, not taken from the environment (where DISTRO may mean something else).
DISTRO = kilted
export DISTRO
PYTEST_ARGS =

setup:
	@bash scripts/setup.sh

run: setup
	@source scripts/env.sh && robot-memory demo

test: setup
	@source scripts/env.sh && python -m pytest $(PYTEST_ARGS)

bench: setup
	@source scripts/env.sh && python -m bench.run_all

clean:
	rm -rf .venv .ros_ws .ros_ws.build.log .venv-jazzy .ros_ws-jazzy .ros_ws-jazzy.build.log

# The validation of "Episodic-to-Semantic Consolidation Without Identity Drift" with our code.
paper: setup
	@source scripts/env.sh && python -m bench.paper

# The closed loop in a physics simulator (MuJoCo, headless): with and without memory.
sim: setup
	@source scripts/env.sh && python -m robot_memory.sim --out bench/results
