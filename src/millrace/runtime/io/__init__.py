"""Data exchange between subtasks: partition events, input splits, partitions and input gates."""
