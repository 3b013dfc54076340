"""A run: the driver process and its checkpoint, the workload and its ledger, load, observers of the output."""
