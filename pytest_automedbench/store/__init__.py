"""The run store: run folders (named, written, read, locked, reused) and the loop-mounted workspace filesystem."""
