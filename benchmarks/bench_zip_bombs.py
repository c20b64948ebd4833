"""Peak memory of ``harness materialize`` on one decompression bomb per format (docs/HARNESS.md).

    PYTHONPATH=src:. python benchmarks/bench_zip_bombs.py [--mib 512] [--src OTHER_TREE/src]

Builds each bomb in a temp folder (``tests/harness/zip_bombs.py``: a .pptx, .docx, .xlsx whose
one part inflates to ``--mib`` MiB from about half a megabyte, a .docx whose header declares
1,000 bytes for the same, a .pdf with a ``--mib`` MiB flate stream), then runs materialize on a
task of that one file in a fresh process per bomb and prints its peak resident memory (and its
view worker's: an upper bound, as Linux counts the pages the child shared with its parent before
exec) with the warning it reported. ``--src`` runs another checkout's code instead (the
"before" column of the table came from the tree before the inflation caps). Never part of the
test suite; each process is limited to 8 GB of address space so an unbounded reader fails
instead of swapping.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.harness import test_zip_bombs as bombs  # noqa: E402 - needs the repository root on the path
from tests.harness.zip_bombs import SLIDE_HEAD, SLIDE_TAIL, Member, write_pdf, write_zip  # noqa: E402


def build(folder: Path, mib: int) -> dict[str, Path]:
    bombs.BOMB_MIB = mib
    return {
        "deck.pptx": write_zip(folder / "deck.pptx", [Member("ppt/slides/slide1.xml", SLIDE_HEAD, SLIDE_TAIL, mib)]),
        "report.docx": bombs._docx_bomb(folder / "report.docx"),
        "forged.docx": bombs._docx_bomb(folder / "forged.docx", declared_size=1000),
        "model.xlsx": bombs._xlsx_bomb(folder / "model.xlsx"),
        "paper.pdf": write_pdf(folder / "paper.pdf", mib),
    }


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (8 << 30, resource.RLIM_INFINITY))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=512, help="inflated size of each bomb's part")
    parser.add_argument("--src", type=Path, default=ROOT / "src", help="the veriscale source tree to run")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="zip-bombs-") as tmp:
        work = Path(tmp)
        (work / "bombs").mkdir()
        made = build(work / "bombs", args.mib)
        print(f"{'file':<12} {'on disk':>10} {'peak MiB':>9} {'worker':>7}  reported")
        for name, path in made.items():
            source = work / f"source-{name}"
            (source / "rollouts" / "x").mkdir(parents=True)
            (source / "task.md").write_text("Summarise.\n")
            path.rename(source / "rollouts" / "x" / name)
            env = {**os.environ, "PYTHONPATH": str(args.src.resolve())}
            done = subprocess.run([sys.executable, "-c", bombs.DRIVER, str(source), str(work / f"out-{name}")],
                                  capture_output=True, text=True, env=env, preexec_fn=_limit_memory, timeout=900)
            if done.returncode != 0:
                print(f"{name:<12} failed: {done.stderr.strip().splitlines()[-1][:120]}")
                continue
            result = json.loads(done.stdout.strip().splitlines()[-1])
            said = [w for w in result["warnings"] if name in w]
            size = (source / "rollouts" / "x" / name).stat().st_size
            print(f"{name:<12} {size:>10,} {result['peak_mib']['RUSAGE_SELF']:>9.0f} "
                  f"{result['peak_mib']['RUSAGE_CHILDREN']:>7.0f}  {said[0][:150] if said else '(viewed)'}")


if __name__ == "__main__":
    main()
