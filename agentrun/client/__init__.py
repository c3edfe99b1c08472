"""`python -m client`: start, follow and inspect runs; validate specs."""
