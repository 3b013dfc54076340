"""Observers: read back what a connector wrote, one module per output kind."""
