"""Entry points of the cluster's processes: the JobManager of a standalone session cluster."""
