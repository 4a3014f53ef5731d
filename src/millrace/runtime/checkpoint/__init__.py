"""Checkpoints: the CheckpointCoordinator, task state snapshots, storage, state assignment."""
