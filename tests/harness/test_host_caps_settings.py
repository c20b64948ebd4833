"""The zip, text-view and hand-back caps are settings: each, from its flag, its environment variable
or its config-file key, reaches the library code that enforces it (``ZipLimits``, the view worker's
limits, ``HarvestReader``), and a bad value from any source is one sentence naming that source.

The commands run for real in process (typer's CliRunner); the caps then act on real files and a
real tar stream through a pipe.
"""

from __future__ import annotations

import io
import json
import os
import tarfile
import zipfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from veriscale.cli import app
from veriscale.errors import UserError
from veriscale.harness import host_caps
from veriscale.harness.jail.harvest import HarvestReader
from veriscale.harness.workspace.safe_copy import extract_zip
from veriscale.harness.workspace.view_worker import ViewWorker
from veriscale.harness.workspace.zip_limits import ZipLimits

MIB = 1 << 20
SOURCES = ("flag", "env", "file")
#: setting -> (a value to give, what the library then holds, the value it should hold)
VALUES = {
    "zip_member_mb": (8, lambda: ZipLimits.from_env().member_bytes, 8 * MIB),
    "zip_file_mb": (2.5, lambda: ZipLimits.from_env().file_bytes, round(2.5 * MIB)),
    "zip_members": (7, lambda: ZipLimits.from_env().members, 7),
    "view_timeout_s": (4.5, lambda: ViewWorker().limits.view_seconds, 4.5),
    "view_memory_mb": (900, lambda: ViewWorker().limits.view_memory_bytes, 900 * MIB),
    "handback_max_files": (3, lambda: _reader().max_entries, 3),
    "handback_max_depth": (5, lambda: _reader().max_depth, 5),
}


@pytest.fixture(autouse=True)
def _clean(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """No cap from the outside (tests/conftest.py forgets a command's choices after each test)."""
    for cap in host_caps.CAPS.values():
        monkeypatch.delenv(cap.env, raising=False)
    config = tmp_path / "config.toml"
    config.write_text("")
    monkeypatch.setenv("VERISCALE_CONFIG", str(config))


def _reader() -> HarvestReader:
    read_fd, write_fd = os.pipe()
    os.close(write_fd)
    return HarvestReader(read_fd, cap_bytes=1 << 20)


def _invoke(source: str, name: str, value, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *args: str):
    """``veriscale ARGS`` (default: settings --json) with ``name`` = ``value`` given by ``source``."""
    cap = host_caps.CAPS[name]
    front: list[str] = []
    if source == "flag":
        front = ["--" + name.replace("_", "-"), str(value)]
    elif source == "env":
        monkeypatch.setenv(cap.env, str(value))
    else:
        table, key = cap.file.split(".")
        (tmp_path / "config.toml").write_text(f"[{table}]\n{key} = {value}\n")
    return CliRunner().invoke(app, [*front, *(args or ("settings", "--json"))])


@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize("name", list(VALUES))
def test_each_cap_from_each_source_reaches_the_library(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       name: str, source: str) -> None:
    value, held, expected = VALUES[name]
    result = _invoke(source, name, value, tmp_path, monkeypatch)
    assert result.exit_code == 0, result.output
    row = next(r for r in json.loads(result.stdout)["settings"] if r["name"] == name)
    assert row["value"] == value
    assert row["origin"] == {"flag": "--" + name.replace("_", "-"), "env": f"${host_caps.CAPS[name].env}",
                             "file": f"config file {host_caps.CAPS[name].file}"}[source]
    assert held() == expected


def test_without_any_source_the_caps_are_the_defaults() -> None:
    assert host_caps.current() == host_caps.HostCaps()
    assert ZipLimits.from_env() == ZipLimits()
    reader = _reader()
    assert (reader.max_entries, reader.max_depth) == (20_000, 64)


def _stream(n_files: int) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for i in range(n_files):
            info = tarfile.TarInfo(f"f{i}.txt")
            tar.addfile(info, io.BytesIO(b""))
    return buffer.getvalue()


@pytest.mark.parametrize("source", SOURCES)
def test_the_hand_back_file_cap_from_each_source_refuses_a_bigger_hand_back(tmp_path: Path, source: str,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    assert _invoke(source, "handback_max_files", 3, tmp_path, monkeypatch).exit_code == 0
    dest = tmp_path / "out"
    dest.mkdir()
    (dest / "kept.txt").write_text("kept\n")
    read_fd, write_fd = os.pipe()
    reader = HarvestReader(read_fd, cap_bytes=1 << 20)
    with os.fdopen(write_fd, "wb") as pipe:
        pipe.write(_stream(4))
    report = reader.apply(dest)
    assert not report.ok and "more than 3 files and folders" in report.error
    assert "VERISCALE_HANDBACK_MAX_FILES" in report.error
    assert sorted(p.name for p in dest.iterdir()) == ["kept.txt"]


@pytest.mark.parametrize("source", SOURCES)
def test_the_zip_entry_cap_from_each_source_refuses_a_bigger_zip(tmp_path: Path, source: str,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    assert _invoke(source, "zip_members", 7, tmp_path, monkeypatch).exit_code == 0
    many = tmp_path / "many.zip"
    with zipfile.ZipFile(many, "w") as archive:
        for i in range(8):
            archive.writestr(f"f{i}.txt", "")
    with pytest.raises(UserError, match=r"holds 8 entries, over the 7-entry cap \(VERISCALE_ZIP_MEMBERS\)"):
        extract_zip(many, tmp_path / "x", limits=ZipLimits.from_env())


BAD = {"flag": ["0", "-2", "nan"], "env": ["0", "-2", "lots", "nan", "inf"], "file": ["0", "-2", '"lots"', "nan"]}


@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize("name", list(VALUES))
def test_a_bad_cap_is_one_sentence_naming_its_source(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    name: str, source: str) -> None:
    cap = host_caps.CAPS[name]
    where = {"flag": "--" + name.replace("_", "-"), "env": cap.env, "file": cap.file}[source]
    for bad in BAD[source]:
        if source == "flag" and bad == "nan" and cap.whole:
            bad = "1.5"  # a whole-number flag: typer refuses it, in its own one line
        monkeypatch.delenv(cap.env, raising=False)
        result = _invoke(source, name, bad, tmp_path, monkeypatch)
        assert result.exit_code == 2, (bad, result.output)
        assert where in result.output and "Traceback" not in result.output, (bad, result.output)


@pytest.mark.parametrize("name", list(VALUES))
def test_library_code_alone_reads_the_environment_through_the_same_parser(monkeypatch: pytest.MonkeyPatch,
                                                                          name: str) -> None:
    cap = host_caps.CAPS[name]
    monkeypatch.setenv(cap.env, "12")
    assert getattr(host_caps.current(), name) == 12
    for bad in ("0", "-1", "lots", "nan", "1e99"):
        monkeypatch.setenv(cap.env, bad)
        with pytest.raises(UserError) as caught:
            host_caps.current()
        assert str(caught.value) == f"${cap.env} = {bad!r} is not {cap.kind}: fix it or unset it"
