"""codewhere: local-first code search by meaning and by name."""

__version__ = "0.1.0"
