"""The ``millrace`` command line."""
