"""Screenshots of the `veriscale serve` dashboard for the docs, taken with headless Chromium.

    python scripts/dashboard_screenshots.py                       # over /tmp/demo/store.sqlite3
    python scripts/dashboard_screenshots.py --store my.sqlite3 --allow-dir ~/agent-runs --out docs/img

The store is copied to a temporary file first (the SQLite backup API, so a store another process
is writing is copied consistently and never written to), then a real `veriscale serve` runs over
the copy and Playwright drives the Debian chromium at 1280×800. It writes, under --out:

    dashboard-runs.png  dashboard-selection.png (a judgement panel open)  dashboard-progress.png
    dashboard-trajectory.png  dashboard-harness.png (only when the store has a harness run)
    dashboard-proxy.png (only when the store has a proxied request)

A page the store has no run for is skipped with a note. dashboard-proxy.png is taller than the
window: it runs from the top of the page to the tournament's ranking.

The images in docs/img are real runs of SmolLM2-135M (the embedded GGUF; through llama_cpp.server
where tools are needed) in one store, made in about 40 minutes on 2 busy CPUs (the harness run took 26)::

    export VERISCALE_STORE=/tmp/demo/store.sqlite3 VERISCALE_THREADS=1
    veriscale select examples/terminal_bench/merge-diff-arc-agi-task.jsonl --budget-tokens 600
    veriscale track examples/progress/success_trajectory.json examples/progress/fail_trajectory.json \
        --every 3 --budget-tokens 800
    GGUF=$(python -c "from veriscale.models.embedded_files import default_gguf_path as p; print(p())")
    python -m llama_cpp.server --model "$GGUF" --n_ctx 8192 --n_threads 1 --port 8001 \
        --model_alias smollm2 --chat_format chatml-function-calling &
    veriscale harness materialize tests/fixtures/harness/quarterly_report /tmp/demo/vs/tasks/quarterly_report --seed 11
    veriscale harness run /tmp/demo/vs/tasks/quarterly_report --model 'http://127.0.0.1:8001/v1?timeout=1800#smollm2' \
        --concurrency 1 --max-steps 4 --run-id demo
    # the proxy: [proxy] temperature = 0.8, max_tokens = 96, timeout_s = 900, progress = false and
    # one [[proxy.candidates]] model = "http://127.0.0.1:8001/v1?timeout=1800#smollm2", n = 3
    VERISCALE_CONFIG=veriscale.toml veriscale serve --model embedded --port 8766 &
    # then one openai SDK request to http://127.0.0.1:8766/v1: a system and a user message, an
    # assistant `bash` tool call (ls /app) with its tool result, and the `bash` tool offered
    python scripts/dashboard_screenshots.py --store /tmp/demo/store.sqlite3 --allow-dir /tmp/demo/vs
"""

from __future__ import annotations

import argparse
import os
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "src"), str(REPO)]

from tests.support.browser import chromium_page  # noqa: E402

VIEWPORT = {"width": 1280, "height": 800}
PROXY_MAX_HEIGHT = 1800  # the proxied request's image: from the top of the page to the tournament's ranking


def copy_store(src: Path, dst: Path) -> None:
    """A consistent copy of ``src`` (read only) into ``dst``."""
    source = sqlite3.connect(f"file:{src}?mode=ro", uri=True)
    target = sqlite3.connect(dst)
    try:
        source.backup(target)
    finally:
        source.close()
        target.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(store: Path, allow_dirs: list[Path], port: int) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "veriscale", "serve", "--store", str(store), "--port", str(port)]
    for folder in allow_dirs:
        cmd += ["--allow-dir", str(folder)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"veriscale serve exited with {proc.returncode}: {proc.stderr.read()[-2000:]}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/health", timeout=2) as r:
                if r.status == 200:
                    return proc
        except OSError:
            time.sleep(0.3)
    proc.terminate()
    raise SystemExit("veriscale serve did not answer /api/health within 120 s")


def first_run(store: Path, commands: tuple[str, ...], where: str = "") -> tuple[int, dict] | None:
    import json

    conn = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    try:
        marks = ",".join("?" for _ in commands)
        row = conn.execute(f"SELECT id, args FROM runs WHERE command IN ({marks}) {where} ORDER BY id DESC LIMIT 1",
                           commands).fetchone()
    finally:
        conn.close()
    return (row[0], json.loads(row[1])) if row else None


def trajectory_of(store: Path) -> tuple[int, str] | None:
    conn = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    try:
        row = conn.execute("SELECT run_id, trajectory FROM run_steps GROUP BY run_id, trajectory "
                           "ORDER BY SUM(error) > 0 DESC, COUNT(*) DESC LIMIT 1").fetchone()
    except sqlite3.OperationalError:
        row = None
    finally:
        conn.close()
    return (row[0], row[1]) if row else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", type=Path, default=Path("/tmp/demo/store.sqlite3"))
    parser.add_argument("--allow-dir", type=Path, action="append", default=None,
                        help="folders the server may read (default: the repo's examples/)")
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "img")
    args = parser.parse_args()
    if not args.store.exists():
        raise SystemExit(f"store '{args.store}' does not exist: give one with --store")
    allow = args.allow_dir or [REPO / "examples"]
    args.out.mkdir(parents=True, exist_ok=True)
    from urllib.parse import quote

    with tempfile.TemporaryDirectory() as tmp:
        store = Path(tmp) / "store.sqlite3"
        copy_store(args.store, store)
        port = free_port()
        proc = start_server(store, allow, port)
        base = f"http://127.0.0.1:{port}"
        written = []
        try:
            with chromium_page(viewport=VIEWPORT) as page:
                def shot(route: str, name: str, prepare=None, clip=None) -> None:
                    page.goto(f"{base}/{route}")
                    page.wait_for_selector("body[data-ready='1']", timeout=30_000)
                    if prepare:
                        prepare()
                    page.wait_for_timeout(300)
                    path = args.out / name
                    if clip:
                        page.screenshot(path=str(path), full_page=True, clip=clip())
                    else:
                        page.screenshot(path=str(path))
                    written.append(path)

                shot("#/runs", "dashboard-runs.png")

                select = first_run(store, ("select",), "AND status = 'ok'")
                if select:
                    def open_cell() -> None:
                        cells = page.locator("[data-testid=heatmap-cell]")
                        best = page.locator("[data-testid=candidate-row].best").get_attribute("data-index") or "0"
                        row = page.locator(f"[data-testid=heatmap-cell][data-i='{best}']")
                        (row if row.count() else cells).first.click()
                        page.wait_for_selector("[data-testid=call-detail]", timeout=30_000)
                        page.wait_for_selector("body[data-ready='1']")
                        page.evaluate("document.querySelector('.evidence').scrollIntoView({block: 'start'})")
                    shot(f"#/runs/{select[0]}", "dashboard-selection.png", open_cell)
                else:
                    print("note: no finished select run in the store: dashboard-selection.png not written")

                track = first_run(store, ("track", "track --follow"))
                if track:
                    shot(f"#/runs/{track[0]}", "dashboard-progress.png")
                else:
                    print("note: no track run in the store: dashboard-progress.png not written")

                traj = trajectory_of(store)
                if traj:
                    def open_error() -> None:
                        page.click("[data-testid=jump-error]")
                        page.wait_for_selector("[data-testid=step-row].selected")
                        page.wait_for_selector("body[data-ready='1']")
                    shot(f"#/runs/{traj[0]}/trajectory/{quote(traj[1], safe='')}", "dashboard-trajectory.png", open_error)
                else:
                    print("note: no stored trajectory steps: dashboard-trajectory.png not written")

                proxied = first_run(store, ("proxy chat", "proxy responses", "proxy anthropic"), "AND status = 'ok'")
                if proxied:
                    def pick_to_ranking() -> dict:
                        # taller than the window: the pick, the conversation, the candidates side by
                        # side and the tournament's ranking, in one image
                        table = page.locator("[data-testid=tournament] table.candidates")
                        end = page.get_by_test_id("tournament").bounding_box()
                        bottom = table.bounding_box() if table.count() else end
                        height = min(PROXY_MAX_HEIGHT, bottom["y"] + bottom["height"] + 16)
                        return {"x": 0, "y": 0, "width": VIEWPORT["width"], "height": height}
                    shot(f"#/runs/{proxied[0]}", "dashboard-proxy.png", clip=pick_to_ranking)
                else:
                    print("note: no proxied request in the store: dashboard-proxy.png not written")

                harness = first_run(store, ("harness run",))
                if harness:
                    shot(f"#/runs/{harness[0]}", "dashboard-harness.png")
                else:
                    print("note: no harness run in the store: dashboard-harness.png not written")
        finally:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
        for path in written:
            print(f"wrote {path.relative_to(REPO) if path.is_relative_to(REPO) else path}")


if __name__ == "__main__":
    main()
