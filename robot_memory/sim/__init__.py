"""A closed loop in a physics simulator (MuJoCo): scene, sim node, grasp skill, planner."""
