"""Scripts that print timings and ratios against torch (never timed tests)."""
