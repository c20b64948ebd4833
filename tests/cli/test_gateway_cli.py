"""The gateway from the command line: several --model endpoints, the config file, global limits.

Two small OpenAI-compatible HTTP servers of the test's own stand in for two replicas of one model
(they answer every chat completion with the same logprobs and count what they were sent).
"""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.support.fault_server import is_read_probe
from veriscale.cli import app

REPLY = {"choices": [{"index": 0, "message": {"role": "assistant", "content": "A"}, "finish_reason": "length",
                      "logprobs": {"content": [{"token": "A", "logprob": -0.2, "top_logprobs": [
                          {"token": "A", "logprob": -0.2}, {"token": "B", "logprob": -1.8}]}]}}],
         "usage": {"prompt_tokens": 40, "completion_tokens": 1}}


def _server() -> tuple[http.server.ThreadingHTTPServer, list[dict]]:
    seen: list[dict] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            self._send({"data": [{"id": "replica"}]})

        def do_POST(self) -> None:  # noqa: N802
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            if self.path.endswith("/chat/completions"):
                if not is_read_probe(body):  # the backend's one-time read probe is not a verdict's call
                    seen.append(body)
                self._send(REPLY)
            else:  # no tokenizer here: the label check is skipped
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()

        def _send(self, doc: dict) -> None:
            body = json.dumps(doc).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, seen


@pytest.fixture()
def replicas() -> Iterator[list[tuple[str, list[dict]]]]:
    servers = [_server() for _ in range(2)]
    yield [(f"http://127.0.0.1:{s.server_address[1]}/v1#replica", seen) for s, seen in servers]
    for server, _ in servers:
        server.shutdown()


def _score(global_args: list[str], *args: str) -> dict:
    result = CliRunner().invoke(app, [*global_args, "score", *args, "--scale", "letters:2", "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_two_model_flags_spread_calls_over_both_endpoints(replicas, tmp_path: Path) -> None:
    (tmp_path / "t.md").write_text("Add 2 and 2.")
    (tmp_path / "a.md").write_text("4")
    (url_a, seen_a), (url_b, seen_b) = replicas
    payload = _score(["--routing", "round_robin"], "--model", url_a, "--model", url_b,
                     str(tmp_path / "t.md"), str(tmp_path / "a.md"))
    assert payload["reward"] is not None and seen_a and seen_b
    assert len(seen_a) + len(seen_b) == payload["usage"]["model_calls"]


def test_affinity_keeps_one_verdicts_calls_on_one_endpoint(replicas, tmp_path: Path) -> None:
    (tmp_path / "t.md").write_text("Add 2 and 2, then explain the method in a sentence.")
    (tmp_path / "a.md").write_text("4, because two and two make four." * 20)
    (url_a, seen_a), (url_b, seen_b) = replicas
    _score([], "--model", url_a, "--model", url_b, str(tmp_path / "t.md"), str(tmp_path / "a.md"))
    assert sorted([len(seen_a), len(seen_b)])[0] == 0  # every criterion of the verdict shares its prefix


def test_the_config_file_names_a_model_of_two_endpoints_and_the_store(replicas, tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    (url_a, seen_a), (url_b, seen_b) = replicas
    monkeypatch.delenv("VERISCALE_STORE")
    store = tmp_path / "from-config.sqlite3"
    config = tmp_path / "config.toml"
    config.write_text(f'model = "pair"\nstore = "{store}"\n[gateway]\nrouting = "round_robin"\n'
                      f'[models.pair]\nendpoints = ["{url_a}", "{url_b}"]\n')
    (tmp_path / "t.md").write_text("Add 2 and 2.")
    (tmp_path / "a.md").write_text("4")
    _score(["--config", str(config)], str(tmp_path / "t.md"), str(tmp_path / "a.md"))
    assert seen_a and seen_b and store.is_file()


def test_bad_global_settings_are_one_line_errors(tmp_path: Path) -> None:
    bad = CliRunner().invoke(app, ["--routing", "random", "runs", "list"])
    assert bad.exit_code == 2 and "--routing = 'random' is unknown" in bad.output and "Traceback" not in bad.output
    missing = CliRunner().invoke(app, ["--config", str(tmp_path / "none.toml"), "runs", "list"])
    assert missing.exit_code == 2 and "does not exist" in missing.output


def test_concurrency_comes_from_the_flag_then_the_config_file(tmp_path: Path) -> None:
    from veriscale.cli import options as o
    from veriscale.cli import settings

    config = tmp_path / "config.toml"
    config.write_text("[gateway]\nconcurrency = 12\n")
    settings.configure(config)
    try:
        assert o.command_settings().concurrency == 12 and o.command_settings(concurrency=3).concurrency == 3
    finally:
        settings.configure(None)
