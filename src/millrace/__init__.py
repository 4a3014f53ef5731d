"""Millrace."""
