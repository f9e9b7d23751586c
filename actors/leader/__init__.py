"""The leader: single writer of cluster state; it applies plans and job changes to the log."""
