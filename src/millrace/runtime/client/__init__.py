"""The client side of job submission: the JobClient endpoint."""
