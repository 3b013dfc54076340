"""Faults (Jepsen's nemeses): schedules as data, and the faults that carry them out, each recorded in the history.

- :mod:`~streamcert.harness.faults.base`: :class:`Fault` (start injects, stop heals) and :class:`FaultContext`
  (what a fault may act on: the environment, the driver, the history, the input topic, a workdir);
- :mod:`~streamcert.harness.faults.registry`: the kinds of fault, registered by the modules of this package, and
  :func:`build_fault`, the one way from a spec to a fault;
- :mod:`~streamcert.harness.faults.schedule`: :class:`FaultSpec`, parsing, canonical dumps, seeded generation;
- one module per family of faults: ``network``, ``servers``, ``topics``, ``driver``, ``points``, ``executor``,
  ``zombie``.
  A new kind of fault is a new module here (and its test): the registry finds it.
"""
