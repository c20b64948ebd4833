"""Recording doubles of vLLM's and SGLang's OpenAI-compatible servers (test doubles, named as such:
no GPU here to run the real ones). Each is a real HTTP server on 127.0.0.1 that records every body
and applies the request rules of the released source, read from the PyPI wheels:

- vLLM 0.34 (``entrypoints/openai/chat_completion/protocol.py``, ``sampling_params.py``):
  ``logprob_token_ids`` (at most 128 ids, needs ``logprobs: true`` on chat; on completions
  ``logprobs`` must equal their count) returns exactly those tokens; ``top_logprobs`` /
  ``logprobs`` above ``max_logprobs`` (20 by default) is HTTP 400; ``continue_final_message``
  with ``add_generation_prompt`` both true is HTTP 400; ``continue_final_message`` continues
  the final assistant message; ``POST /tokenize`` takes ``prompt`` and ``add_special_tokens``.
- SGLang 0.5 (``srt/entrypoints/openai/protocol.py``): ``continue_final_message`` on chat;
  ``token_ids_logprob`` exists only on its native ``/generate``, so ``logprob_token_ids`` is an
  unknown field its OpenAI routes ignore; no ``max_logprobs`` cap.

- an OpenAI-compatible server that honours ``logit_bias`` (flavour ``"post-bias"``): the bias is
  added to the listed token ids' logits before the softmax that both picks the token and gives the
  reported ``top_logprobs`` (vLLM with ``--logprobs-mode processed_logprobs`` does so); vLLM's
  ``/tokenize`` and its 20-logprobs cap; ``logprob_token_ids`` is an unknown field it ignores.
  Flavour ``"pre-bias"`` honours the bias in its choice but reports the logprobs from before it,
  as llama.cpp's servers do.

The "weights" are a fixed next-token distribution over a small vocabulary in which the score
labels sit below the top 20, so a top-20 read loses them and an exact read does not::

    with ServerDouble("vllm") as srv:     # or "sglang", "post-bias", "pre-bias"
        srv.url              # http://127.0.0.1:PORT/v1
        srv.bodies           # [(path, body), ...] of every completion request
        TRUE_LABELS          # the labels' true probabilities at a grade slot
"""

from __future__ import annotations

import math
from typing import Any

from tests.support.json_http import JsonHandler, local_server

FILLER = [f" w{i}" for i in range(30)]
#: the next-token distribution at a grade slot: 30 filler tokens carry most of the mass
SLOT = {**{t: 0.028 for t in FILLER}, "A": 0.004, " A": 0.02, "B": 0.002, " B": 0.03, " C": 0.01, "C": 0.001,
        " D": 0.004, " E": 0.003, "\n": 0.02, " zebra": 1e-7}
SLOT["ws-rest"] = 1.0 - sum(SLOT.values())
#: after a bare newline the grade follows
AFTER_NEWLINE = {"A": 0.5, "B": 0.3, "C": 0.1, "filler": 0.1}
TRUE_LABELS = {lab: SLOT.get(lab, 0) + SLOT.get(" " + lab, 0) + SLOT["\n"] * AFTER_NEWLINE.get(lab, 0)
               for lab in "ABCDE"}
CONTINUED = {"ris": 0.9, " Paris": 0.1}
VOCAB = sorted(set(SLOT) | set(AFTER_NEWLINE) | set(CONTINUED) | {" "} | {c for c in "ABCDE"} | {" " + c for c in "ABCDE"})
IDS = {t: i for i, t in enumerate(VOCAB)}
#: the flavours with vLLM's /tokenize endpoint and its cap of 20 logprobs
TOKENIZERS = ("vllm", "post-bias", "pre-bias")


def biased(dist: dict[str, float], bias: dict[str, Any]) -> dict[str, float]:
    """``dist`` after adding each listed token id's bias to its logit (the softmax taken again)."""
    raised = {t: p * math.exp(float(bias.get(str(IDS[t]), 0.0))) if t in IDS else p for t, p in dist.items()}
    total = sum(raised.values())
    return {t: p / total for t, p in raised.items()}


class ServerDouble:
    """A recording double of ``flavour`` ("vllm", "sglang", "post-bias" or "pre-bias"); see the module's text."""

    def __init__(self, flavour: str) -> None:
        self.flavour = flavour
        self.bodies: list[tuple[str, dict[str, Any]]] = []
        double = self

        class Handler(JsonHandler):
            _send = JsonHandler.send_json

            def do_GET(self) -> None:
                if self.path.rstrip("/").endswith("/models"):
                    return self._send(200, {"object": "list", "data": [{"id": "judge", "object": "model"}]})
                self._send(404, {"error": "not found"})

            def do_POST(self) -> None:
                body = self.read_json()
                if self.path == "/tokenize" and double.flavour in TOKENIZERS:
                    text = body.get("prompt", "")
                    return self._send(200, {"tokens": [IDS[text]] if text in IDS else [IDS[" w0"], IDS[" w1"]]})
                if not self.path.endswith("/completions"):
                    return self._send(404, {"error": "not found"})
                double.bodies.append((self.path, body))
                code, payload = double.answer(self.path.endswith("/chat/completions"), body)
                self._send(code, payload)

        self._server, self.url, self._thread = local_server(Handler)

    def __enter__(self) -> "ServerDouble":
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._server.shutdown()
        self._server.server_close()

    # -- the rules --------------------------------------------------------------------------
    def answer(self, chat: bool, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        vllm = self.flavour == "vllm"
        ids = body.get("logprob_token_ids") if vllm else None
        if chat:
            width = body.get("top_logprobs") or 0
            if ids is not None and not body.get("logprobs"):
                return 400, {"error": {"message": "when using `logprob_token_ids`, `logprobs` must be set to true."}}
            if body.get("continue_final_message") and body.get("add_generation_prompt", True):
                return 400, {"error": {"message": "Cannot set both `continue_final_message` and `add_generation_prompt` to True."}}
            text = self._chat_text(body)
        else:
            width = body.get("logprobs") or 0
            if ids is not None and width and width != len(ids):
                return 400, {"error": {"message": "logprobs must equal len(logprob_token_ids)"}}
            text = body.get("prompt", "")
        if self.flavour in TOKENIZERS and ids is None and width > 20:
            return 400, {"error": {"message": f"Requested sample logprobs of {width}, which is greater than max allowed: 20"}}
        if ids is not None and len(ids) > 128:
            return 400, {"error": {"message": "Requested logprob_token_ids of length > 128"}}
        dist = self._distribution(text)
        chooser = dist
        if self.flavour in ("post-bias", "pre-bias") and body.get("logit_bias"):
            chooser = biased(dist, body["logit_bias"])
            if self.flavour == "post-bias":
                dist = chooser  # the reported logprobs are those after the bias
        if ids is not None:
            shown = [(VOCAB[i], dist.get(VOCAB[i], 1e-12)) for i in ids]
        else:
            shown = sorted(dist.items(), key=lambda kv: -kv[1])[:width]
        chosen = max(chooser.items(), key=lambda kv: kv[1])[0]
        if chat:
            lp = {"content": [{"token": chosen, "logprob": math.log(dist[chosen]),
                               "top_logprobs": [{"token": t, "logprob": math.log(p)} for t, p in shown]}]}
            choice = {"index": 0, "message": {"role": "assistant", "content": chosen}, "logprobs": lp,
                      "finish_reason": "length"}
        else:
            lp = {"tokens": [chosen], "token_logprobs": [math.log(dist[chosen])],
                  "top_logprobs": [{t: math.log(p) for t, p in shown}], "text_offset": [0]}
            choice = {"index": 0, "text": chosen, "logprobs": lp, "finish_reason": "length"}
        return 200, {"id": "x", "object": "chat.completion" if chat else "text_completion", "model": "judge",
                     "choices": [choice], "usage": {"prompt_tokens": 10, "completion_tokens": 1, "total_tokens": 11}}

    def _chat_text(self, body: dict[str, Any]) -> str:
        """The text the model continues: the final assistant message when the server continues it."""
        msgs = body.get("messages") or []
        if msgs and msgs[-1].get("role") == "assistant" and body.get("continue_final_message"):
            return str(msgs[-1].get("content") or "")
        return ""  # a fresh assistant turn

    @staticmethod
    def _distribution(text: str) -> dict[str, float]:
        if text.endswith("Pa"):
            return dict(CONTINUED)
        if text.endswith("\n") and text.rstrip().endswith(":"):
            return dict(AFTER_NEWLINE)
        if text.rstrip().endswith(":"):
            return dict(SLOT)
        return {"Sure": 0.6, "A": 0.2, "B": 0.2}  # a fresh turn: not the slot at all
