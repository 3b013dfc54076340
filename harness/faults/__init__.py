"""Faults (Jepsen's nemeses): schedules as data, and the faults that carry them out, each recorded in the history."""
