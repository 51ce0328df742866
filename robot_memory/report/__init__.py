"""`robot-memory report`: what the robot learned, as one HTML page. data.py reads the
store, plots.py draws the figures, page.py puts the page together."""
