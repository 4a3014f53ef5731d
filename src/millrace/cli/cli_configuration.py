"""What every ``millrace`` command shares: ``-D``/``--config`` options and log files."""

from __future__ import annotations

import difflib
import logging
import os
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from millrace.config import ClusterOptions, Configuration, all_options
from millrace.errors import ConfigError

__all__ = [
    "ConfigFile",
    "DynamicProperties",
    "configure_logging",
    "load_configuration",
    "load_configuration_or_exit",
]

DynamicProperties = Annotated[
    list[str], typer.Option("-D", help="Configuration key=value (repeatable).")
]
ConfigFile = Annotated[
    Path | None,
    typer.Option("--config", exists=True, dir_okay=False, help="YAML configuration file."),
]


def load_configuration(config_file: Path | None, dynamic: list[str]) -> Configuration:
    """Configuration from the YAML file and ``-D key=value`` pairs (later wins), validated.

    Raises:
        ConfigError: For a malformed pair, an unknown key or an invalid value.
    """
    conf = Configuration.from_yaml(config_file) if config_file else Configuration()
    conf = conf.with_overrides(Configuration.parse_dynamic_properties(dynamic))
    known = {option.key for option in all_options()}
    for key, value in conf.to_dict().items():
        if key not in known and not key.startswith("spark."):
            close = difflib.get_close_matches(key, sorted(known), n=1)
            hint = f"did you mean {close[0]!r}?" if close else "run `millrace config` for the list"
            raise ConfigError(key, value, f"a known configuration key ({hint})")
    conf.validate()
    return conf


def load_configuration_or_exit(
    console: Console, config_file: Path | None, dynamic: list[str]
) -> Configuration:
    """:func:`load_configuration`, printing the error and exiting with code 2 on failure."""
    try:
        return load_configuration(config_file, dynamic)
    except ConfigError as error:
        console.print(f"[red]configuration error:[/] {error}")
        raise typer.Exit(2) from None


def configure_logging(conf: Configuration, name: str, *, stderr: bool = False) -> Path:
    """Log INFO and above to ``<io.tmp.dirs>/log/<name>-<time>-<pid>.log``.

    Args:
        conf: Locates the log directory.
        name: Process kind, e.g. ``client``, ``jobmanager``.
        stderr: Also log warnings and errors to stderr (foreground processes).

    Returns:
        The log file.
    """
    directory = Path(conf.get(ClusterOptions.TMP_DIR)) / "log"
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.log"
    formatter = logging.Formatter(
        "%(asctime)s %(levelname)s [%(threadName)s] %(name)s: %(message)s"
    )
    handler = logging.FileHandler(path)
    handler.setFormatter(formatter)
    root = logging.getLogger()
    root.addHandler(handler)
    if stderr:
        console_handler = logging.StreamHandler()
        console_handler.setLevel(logging.WARNING)
        console_handler.setFormatter(formatter)
        root.addHandler(console_handler)
    root.setLevel(logging.INFO)
    for noisy in ("py4j", "fsspec", "uvicorn.access"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    return path.resolve()
