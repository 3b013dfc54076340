"""streamcert: conformance tests and benchmarks for streaming connectors on Apache Spark."""

__all__ = ["__version__"]

__version__ = "0.1.0"
