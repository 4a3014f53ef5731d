"""Pieces of the TCP transport (issue 3): length-prefixed framing so far."""
