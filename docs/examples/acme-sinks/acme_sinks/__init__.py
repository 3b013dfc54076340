"""acme-sinks: an example of a connector that lives outside streamcert, certified through its SPI."""
