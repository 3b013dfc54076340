"""Verification: checkers over the ledger and the output, metrics, evidence from Spark's event log."""
