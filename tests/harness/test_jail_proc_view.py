"""What a session learns about the host from ``/proc`` (issue 30, item 2).

A real session reads ``/proc/1/cmdline``, ``/proc/self/cmdline``, every ``/proc/*/cmdline`` and
``environ`` it can see, and ``/proc/self/mountinfo``, and writes them into its output folder (not
to stdout: the host translates inside paths in printed output back to host paths). None may name
the veriscale source folder, the package's parent folder, the model relay's host socket, the
test's folders or the launcher's JSON configuration. The one host path a bind mount must show is
its source's path within its filesystem (mountinfo's 4th field): for the task folder that field
is allowed, and only there. Runs as root in CI and as a plain user where the jail suites are
rerun unprivileged (``runuser -u veriscale-ci``).
"""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest

import veriscale
from tests.harness.jail_probe import session_spec
from veriscale.harness.jail import jail_inside
from veriscale.harness.jail.sandbox import check_jail_available, run_jailed

READ_PROC = textwrap.dedent(
    """
    import glob, json, os
    seen = {}
    def grab(path):
        try:
            with open(path, "rb") as handle:
                seen[path] = handle.read().replace(b"\\0", b" ").decode("utf-8", "replace")
        except OSError as exc:
            seen[path] = "unreadable: " + str(exc.errno)
    for path in ["/proc/1/cmdline", "/proc/self/cmdline", "/proc/self/mountinfo", "/proc/self/environ",
                 *glob.glob("/proc/[0-9]*/cmdline"), *glob.glob("/proc/[0-9]*/environ"),
                 *glob.glob("/proc/[0-9]*/mountinfo")]:
        grab(path)
    seen["cwd"] = os.getcwd()
    with open("proc.json", "w") as handle:
        json.dump(seen, handle)
    """
)


@pytest.fixture(scope="module", autouse=True)
def jail_available() -> None:
    check_jail_available()


def test_proc_inside_names_no_host_path(layout: dict[str, Path], tmp_path: Path) -> None:
    spec = session_spec(layout, model_endpoint=("127.0.0.1", 9))  # a relay runs; nothing is called
    result = run_jailed(spec, [sys.executable, "-c", READ_PROC], timeout_s=30)
    assert result.returncode == 0, result.stderr
    seen = json.loads((layout["out"] / "proc.json").read_text())
    assert seen["/proc/1/cmdline"].split()[1:3] == ["--args", seen["/proc/1/cmdline"].split()[2]]  # by descriptor
    assert len(seen) > 6 and not any(v.startswith("unreadable") for k, v in seen.items() if "/self/" in k)

    source_folder = str(Path(jail_inside.__file__).resolve().parent)
    package_parent = str(Path(veriscale.__file__).resolve().parent.parent)
    forbidden = {
        "source folder": source_folder,
        "package parent": package_parent,
        "relay socket folder": "veriscale-forward-",
        "test folder": str(tmp_path),
        "task folder": str(layout["task"]),
        "output folder": str(layout["out"]),
        "launcher configuration": '"harvest_fd"',
        "bubblewrap options": "--ro-bind",
    }
    for path, text in seen.items():
        lines = text.splitlines() if path.endswith("mountinfo") else [text]
        for line in lines:
            if path.endswith("mountinfo"):
                fields = line.split(" ")
                if fields[3] == str(layout["task"]):  # a bind shows its source within its filesystem
                    fields[3] = "<task source>"
                line = " ".join(fields)
            for what, value in forbidden.items():
                assert value not in line, f"{path} shows the {what} ({value!r}): {line[:500]!r}"
    assert str(tmp_path) not in seen["cwd"]
