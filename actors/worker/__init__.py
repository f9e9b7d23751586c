"""Scheduler workers: dequeue an evaluation, schedule it against a read replica, submit a plan."""
