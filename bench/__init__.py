"""Benchmarks: plain scripts that print their figures; results live in docs/performance.md."""
