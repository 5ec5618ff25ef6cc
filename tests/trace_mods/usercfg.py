"""A user module of settings, for tests/test_trace_reuse.py."""

lr = 1.0
