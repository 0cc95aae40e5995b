"""Reading and writing transcript bytes: JSON lines, discovery, the one safe append, locking."""
