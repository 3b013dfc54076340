"""streamcert."""
