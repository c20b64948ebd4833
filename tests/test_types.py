"""The typed core: ``mypy --strict`` over ``veriscale.engine``, ``.models`` and ``.selection``
reports nothing (the seams they offer the rest of the package are checked, not hoped for), nor over
``.integrations``, where veriscale meets other packages' types (Inspect AI's, the MCP SDK's).

    cd src && python -m mypy --strict -p veriscale.engine -p veriscale.models -p veriscale.selection \
        -p veriscale.integrations
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
STRICT_PACKAGES = ("veriscale.engine", "veriscale.models", "veriscale.selection", "veriscale.integrations")


def test_the_core_packages_type_check_under_mypy_strict(tmp_path: Path) -> None:
    packages = [arg for name in STRICT_PACKAGES for arg in ("-p", name)]
    done = subprocess.run([sys.executable, "-m", "mypy", "--config-file", str(SRC.parent / "pyproject.toml"),
                           "--strict", "--cache-dir", str(tmp_path / "cache"), *packages], cwd=SRC, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    assert "Success: no issues found" in done.stdout
