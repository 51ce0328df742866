"""rosbag2 bags in, as execution results: reading a bag's messages (reading.py), mapping
another message type onto ExecutionResult's fields (mapping.py), and the import itself
into the episodic log (importing.py, `robot-memory import-bag`)."""
