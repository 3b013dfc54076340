"""The test harness: the stack, a run, faults and verification, tied together by :mod:`streamcert.harness.scenario`."""
