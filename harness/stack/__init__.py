"""The stack: Kafka, Toxiproxy, PostgreSQL and Spark, by provider, with installers, process control and checks."""
