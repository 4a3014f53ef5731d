"""CheckpointSettings: ``execution.checkpointing.*`` and ``state.checkpoints.num-retained``."""

from __future__ import annotations

from dataclasses import dataclass

from millrace.config import CheckpointingMode, CheckpointingOptions, Configuration

__all__ = ["CheckpointSettings"]


@dataclass(frozen=True)
class CheckpointSettings:
    """``execution.checkpointing.*`` and ``state.checkpoints.num-retained``.

    Attributes:
        interval: Seconds between periodic checkpoints; 0 disables them (savepoints still
            work).
        mode: EXACTLY_ONCE (aligned barriers) or AT_LEAST_ONCE.
        timeout: Seconds before a pending checkpoint is aborted.
        max_concurrent: Checkpoints in flight at once.
        min_pause: Seconds between the end of a checkpoint and the next periodic trigger.
        num_retained: Completed checkpoints kept.
    """

    interval: float
    mode: CheckpointingMode = CheckpointingMode.EXACTLY_ONCE
    timeout: float = 600.0
    max_concurrent: int = 1
    min_pause: float = 0.0
    num_retained: int = 1

    @classmethod
    def from_configuration(cls, configuration: Configuration) -> CheckpointSettings:
        """The settings a job's configuration gives.

        Raises:
            ConfigError: If a value is invalid (the key, the value and what is allowed).
        """
        return cls(
            configuration.get(CheckpointingOptions.INTERVAL),
            configuration.get(CheckpointingOptions.MODE),
            configuration.get(CheckpointingOptions.TIMEOUT),
            configuration.get(CheckpointingOptions.MAX_CONCURRENT),
            configuration.get(CheckpointingOptions.MIN_PAUSE),
            configuration.get(CheckpointingOptions.NUM_RETAINED),
        )
