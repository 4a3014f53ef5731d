"""CheckpointSettings from a job's configuration: every key reaches its field."""

from __future__ import annotations

from millrace.config import CheckpointingMode, Configuration
from millrace.runtime.checkpoint.checkpoint_settings import CheckpointSettings


def test_every_checkpointing_key_of_the_configuration_reaches_its_setting() -> None:
    conf = Configuration(
        {
            "execution.checkpointing.interval": "2 s",
            "execution.checkpointing.mode": "AT_LEAST_ONCE",
            "execution.checkpointing.timeout": "30 s",
            "execution.checkpointing.max-concurrent-checkpoints": "3",
            "execution.checkpointing.min-pause": "500 ms",
            "state.checkpoints.num-retained": "4",
        }
    )
    assert CheckpointSettings.from_configuration(conf) == CheckpointSettings(
        interval=2.0,
        mode=CheckpointingMode.AT_LEAST_ONCE,
        timeout=30.0,
        max_concurrent=3,
        min_pause=0.5,
        num_retained=4,
    )


def test_an_empty_configuration_gives_the_defaults_with_checkpointing_off() -> None:
    assert CheckpointSettings.from_configuration(Configuration()) == CheckpointSettings(0.0)
