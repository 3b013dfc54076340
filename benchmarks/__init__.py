"""Benchmarks: numbers for reports, never assertions."""
