"""Evidence that leaves the robot and can be checked without it: export bundles of a
store's history (bundle.py writes and imports them, bundle_format.py is their layout,
bundle_verify.py checks one) and signed checkpoints of the chain's head in a witness
file (witness.py)."""
