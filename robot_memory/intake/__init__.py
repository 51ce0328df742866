"""Intake: how an execution result comes in, from whichever path, or is refused.

`admission` is the one door: every path (the logger's topics and its `record_event`
service through `ingest.Ingest`, `robot-memory ingest`, `import-bag`) hands it a
result's fields and gets back the event to append or the refusal, counted by reason.
`records` validates (with `privacy`, the privacy boundary), `receipt` applies the
receiver's clock, `json_lines` reads a line of a JSON-lines file (a serialized result
is read by wire/execution_result.py). ROS-free.
"""
