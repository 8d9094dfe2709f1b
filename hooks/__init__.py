"""Metacontroller hooks for DeciceJobs: pure functions from observed state to children and status."""
