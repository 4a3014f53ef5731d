"""SavepointTargets: where a savepoint a client asks for may be written (issue 9, case 5):
relative targets under ``state.savepoints.dir``, everything normalized and confined to the
allowed roots, local paths and fsspec URLs alike."""

from __future__ import annotations

import os

import pytest

from millrace.config import Configuration
from millrace.errors import CheckpointError
from millrace.runtime.checkpoint.savepoint_targets import SavepointTargets


def test_savepoint_targets_stay_under_the_allowed_roots(tmp_path) -> None:
    savepoints = tmp_path / "savepoints"
    savepoints.mkdir()
    (savepoints / "escape").symlink_to(tmp_path)  # a link inside that points outside
    targets = SavepointTargets(str(savepoints))
    assert targets.resolve(None) == str(savepoints)
    assert targets.resolve("nightly") == str(savepoints / "nightly")
    assert targets.resolve(str(savepoints / "a" / ".." / "b")) == str(savepoints / "b")
    for outside in ("../x", "/etc", str(savepoints / ".." / "x"), "escape/x", "file:///etc"):
        with pytest.raises(CheckpointError, match=r"state\.savepoints\.allowed-roots"):
            targets.resolve(outside)
    remote = SavepointTargets("s3://bucket/savepoints", ["s3://bucket/savepoints", "/mnt/sp"])
    assert remote.resolve("nightly") == "s3://bucket/savepoints/nightly"
    assert remote.resolve("/mnt/sp/x") == os.path.realpath("/mnt/sp/x")
    for outside in ("s3://bucket/other", "s3://bucket/savepoints/../other", "s3://evil/savepoints"):
        with pytest.raises(CheckpointError):
            remote.resolve(outside)


def test_no_target_or_an_empty_one_is_the_savepoints_directory_as_configured(tmp_path) -> None:
    configured = f"{tmp_path}/sp/"  # returned as is, not normalized
    targets = SavepointTargets(configured)
    assert targets.resolve(None) == configured
    assert targets.resolve("") == configured


def test_the_savepoints_directory_itself_and_what_lies_under_it_are_allowed(tmp_path) -> None:
    targets = SavepointTargets(str(tmp_path / "sp"))
    assert targets.resolve(str(tmp_path / "sp")) == str(tmp_path / "sp")
    assert targets.resolve(str(tmp_path / "sp" / "a" / "b")) == str(tmp_path / "sp" / "a" / "b")
    assert targets.resolve(f"file://{tmp_path}/sp/x") == str(tmp_path / "sp" / "x")
    with pytest.raises(CheckpointError, match="outside"):
        targets.resolve(str(tmp_path / "sp-other"))  # a sibling sharing the prefix


def test_a_target_with_a_nul_character_is_refused_with_a_message_that_says_so(tmp_path) -> None:
    targets = SavepointTargets(str(tmp_path))
    with pytest.raises(CheckpointError) as refused:
        targets.resolve(f"{tmp_path}/a\x00b")
    assert str(refused.value) == "a savepoint target cannot contain a NUL character"


def test_a_target_outside_names_itself_every_root_and_the_keys_that_set_them(tmp_path) -> None:
    targets = SavepointTargets(str(tmp_path / "sp"), [str(tmp_path / "a"), "s3://bucket/sp"])
    with pytest.raises(CheckpointError) as refused:
        targets.resolve("/elsewhere")
    assert str(refused.value) == (
        f"savepoint target '/elsewhere' lies outside the allowed directories "
        f"{tmp_path / 'a'}, s3://bucket/sp (state.savepoints.dir, state.savepoints.allowed-roots)"
    )


def test_allowed_roots_replace_the_savepoints_directory_and_empty_ones_are_ignored(
    tmp_path,
) -> None:
    targets = SavepointTargets(str(tmp_path / "sp"), ["", str(tmp_path / "a")])
    assert targets.roots == (str(tmp_path / "a"),)
    assert targets.resolve(str(tmp_path / "a" / "x")) == str(tmp_path / "a" / "x")
    for outside in ("x", str(tmp_path / "sp" / "x")):  # under state.savepoints.dir, no root
        with pytest.raises(CheckpointError):
            targets.resolve(outside)


def test_url_targets_are_normalized_by_scheme_host_and_path() -> None:
    targets = SavepointTargets("s3://bucket/sp")
    assert targets.roots == ("s3://bucket/sp",)
    assert targets.resolve("s3://bucket/sp") == "s3://bucket/sp"
    assert targets.resolve("s3://bucket/sp/a/./b/../c/") == "s3://bucket/sp/a/c"
    assert targets.resolve("s3://bucket//sp//x") == "s3://bucket/sp/x"
    assert targets.resolve("a/b") == "s3://bucket/sp/a/b"  # relative: joined as a URL path
    assert targets.resolve("S3://bucket/sp/x") == "s3://bucket/sp/x"  # schemes ignore case
    with pytest.raises(CheckpointError):
        targets.resolve("gs://bucket/sp/x")  # another scheme
    with pytest.raises(CheckpointError):
        targets.resolve("/sp/x")  # a local path, not the bucket


def test_a_root_ending_in_any_character_confines_to_its_subdirectories(tmp_path) -> None:
    assert SavepointTargets(str(tmp_path), ["/"]).resolve("/x/y") == "/x/y"
    upper = SavepointTargets(str(tmp_path), [str(tmp_path / "SPX")])
    assert upper.resolve(str(tmp_path / "SPX" / "y")) == str(tmp_path / "SPX" / "y")
    remote = SavepointTargets("s3://bucket/Xp")
    assert remote.resolve("s3://bucket/Xp/1") == "s3://bucket/Xp/1"


def test_a_url_root_with_a_trailing_slash_still_confines_to_its_subdirectories() -> None:
    targets = SavepointTargets("s3://bucket/sp", ["s3://bucket/sp/"])
    assert targets.roots == ("s3://bucket/sp",)
    assert targets.resolve("s3://bucket/sp/x") == "s3://bucket/sp/x"


def test_a_relative_target_is_joined_as_a_local_path_under_a_local_savepoints_directory(
    tmp_path,
) -> None:
    targets = SavepointTargets(str(tmp_path / "sp"))
    assert targets.resolve("weekly/1") == str(tmp_path / "sp" / "weekly" / "1")
    for not_relative in ("file:x", "s3://bucket/sp/x"):  # not joined under the directory
        with pytest.raises(CheckpointError):
            targets.resolve(not_relative)


def test_a_url_that_cannot_be_parsed_is_refused_as_not_valid() -> None:
    targets = SavepointTargets("s3://bucket/sp")
    with pytest.raises(CheckpointError, match=r"^savepoint target 'http://\[::1/x' is not valid: "):
        targets.resolve("http://[::1/x")


def test_from_configuration_reads_the_directory_and_the_comma_separated_roots(tmp_path) -> None:
    conf = Configuration(
        {
            "state.savepoints.dir": str(tmp_path / "sp"),
            "state.savepoints.allowed-roots": f" {tmp_path}/a , ,{tmp_path}/b,",
        }
    )
    targets = SavepointTargets.from_configuration(conf)
    assert targets.savepoints_dir == str(tmp_path / "sp")
    assert targets.roots == (str(tmp_path / "a"), str(tmp_path / "b"))
    default = SavepointTargets.from_configuration(
        Configuration({"state.savepoints.dir": str(tmp_path / "sp")})
    )
    assert default.roots == (str(tmp_path / "sp"),)
