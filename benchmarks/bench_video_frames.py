"""How much faster ``video_frames`` is when it seeks to the key frame before each frame wanted than
when it decodes the video in one pass from the start (the way it did before), in the same run.

A video is written with PyAV into a temporary folder (no data files): by default 2 minutes at 30 fps,
320x240, H.264 (MPEG-4 Part 2 where the wheel lacks libx264) with a key frame each 250 frames (x264's
default) and none at scene cuts; every frame a colour and a square place of its own. Then, per
choice (default ``8``, the ``frames`` setting's default), ``--repeats`` timed calls of each path,
alternating; the best and the median wall time of each, their ratio, the frames each decoded and
whether both gave the same frames (at_s, labels and PNG bytes). The whole call includes the demux
pass that learns every frame's time (the same for both paths); the decode-only ratio times the
decoding step alone.

    PYTHONPATH=src python benchmarks/bench_video_frames.py
    PYTHONPATH=src python benchmarks/bench_video_frames.py --seconds 600 --choices 8,every:10,keys --json video.json

Results go to stdout; a JSON file only with ``--json PATH``.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO))

from tests.data.video_files import write_video  # noqa: E402
from veriscale.data.images import ImageSettings  # noqa: E402
from veriscale.data.video import _targets, _video_frames, parse_frames  # noqa: E402
from veriscale.data.video_decode import DecodeStats, decode_frames, nearest, read_timing  # noqa: E402


def make_video(path: Path, seconds: int, fps: int, size: tuple[int, int], gop: int) -> str:
    """The benchmark video at ``path``; returns the codec used."""
    width, height = size
    side = max(8, height // 6)

    def paint(i: int, pixels: Any) -> None:
        pixels[:] = ((i // 3) % 256, (i // 7) % 256, 255 - (i // 11) % 256)
        x, y = (i * 2) % (width - side), (i // 2) % (height - side)
        pixels[y:y + side, x:x + side] = 255

    codec = write_video(path, seconds * fps, fps, size, gop, paint, preset="veryfast")
    return codec


def run_once(path: Path, choice: str, seek: bool) -> tuple[float, DecodeStats, list]:
    stats = DecodeStats()
    start = time.perf_counter()
    clip = _video_frames(path, choice, seek=seek, stats=stats)
    wall = time.perf_counter() - start
    return wall, stats, [(f.at_s, f.label, f.data) for f in clip.frames]


def decode_once(path: Path, choice: str, seek: bool) -> float:
    """The wall time of the decoding step alone (no demuxing for the timing, no file checks)."""
    timing = read_timing(path)
    picked = sorted({nearest(timing.times, t) for t in _targets(parse_frames(choice), timing, [])})
    start = time.perf_counter()
    decode_frames(path, timing, picked, ImageSettings.current().max_side, seek=seek)
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=int, default=120)
    ap.add_argument("--fps", type=int, default=30)
    ap.add_argument("--size", default="320x240", help="WIDTHxHEIGHT")
    ap.add_argument("--gop", type=int, default=250, help="frames between key frames")
    ap.add_argument("--choices", default="8", help="frames settings, comma-separated (e.g. 8,every:10,keys)")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--json", dest="json_out", help="also write the results to this JSON file")
    args = ap.parse_args()
    width, height = (int(n) for n in args.size.lower().split("x"))
    rows: dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.mp4"
        started = time.perf_counter()
        codec = make_video(path, args.seconds, args.fps, (width, height), args.gop)
        timing = read_timing(path)
        print(f"video: {args.seconds} s at {args.fps} fps, {width}x{height}, {codec}, {len(timing.times)} frames, "
              f"{len(timing.keys)} key frames, {path.stat().st_size:,} bytes (written in "
              f"{time.perf_counter() - started:.1f} s)", file=sys.stderr)
        for choice in args.choices.split(","):
            walls: dict[bool, list[float]] = {True: [], False: []}
            decode_walls: dict[bool, list[float]] = {True: [], False: []}
            decoded: dict[bool, int] = {}
            seeks, frames_same = 0, True
            for _ in range(args.repeats):
                got = {}
                for seek in (True, False):
                    wall, stats, got[seek] = run_once(path, choice, seek)
                    walls[seek].append(wall)
                    decoded[seek] = stats.decoded
                    if seek:
                        seeks = stats.seeks
                    decode_walls[seek].append(decode_once(path, choice, seek))
                frames_same = frames_same and got[True] == got[False]
            rows[choice] = {
                "frames": len(got[True]), "identical": frames_same, "seeks": seeks,
                "decoded_seek": decoded[True], "decoded_sequential": decoded[False],
                "seek_best_s": round(min(walls[True]), 4), "seek_median_s": round(statistics.median(walls[True]), 4),
                "sequential_best_s": round(min(walls[False]), 4),
                "sequential_median_s": round(statistics.median(walls[False]), 4),
                "speedup_median": round(statistics.median(walls[False]) / statistics.median(walls[True]), 1),
                "decode_seek_median_s": round(statistics.median(decode_walls[True]), 4),
                "decode_sequential_median_s": round(statistics.median(decode_walls[False]), 4),
                "decode_speedup_median": round(statistics.median(decode_walls[False])
                                               / statistics.median(decode_walls[True]), 1),
            }
            print(f"choice {choice}: done", file=sys.stderr, flush=True)
    print(f"{'choice':<12} {'frames':>6} {'same':>5} {'seeks':>5} {'decoded seek/seq':>17} "
          f"{'seek s (med)':>12} {'seq s (med)':>11} {'ratio':>6} {'decode-only ratio':>17}")
    for choice, r in rows.items():
        print(f"{choice:<12} {r['frames']:>6} {str(r['identical']):>5} {r['seeks']:>5} "
              f"{str(r['decoded_seek']) + '/' + str(r['decoded_sequential']):>17} {r['seek_median_s']:>12.3f} "
              f"{r['sequential_median_s']:>11.3f} {r['speedup_median']:>5.1f}x {r['decode_speedup_median']:>16.1f}x")
    if args.json_out:
        Path(args.json_out).write_text(json.dumps({
            "video": {"seconds": args.seconds, "fps": args.fps, "size": [width, height], "gop": args.gop,
                      "codec": codec, "frames": len(timing.times), "key_frames": len(timing.keys)},
            "repeats": args.repeats, "machine": {"python": platform.python_version(), "cpu": platform.processor(),
                                                 "system": platform.system()},
            "rows": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
