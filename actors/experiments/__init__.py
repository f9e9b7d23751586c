"""Autoscaling policy experiments: replay demand against policies in a pure simulator."""
