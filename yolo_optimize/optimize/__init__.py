"""Graph and precision passes over exported artifacts."""
