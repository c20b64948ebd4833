"""What a server backend learned by probing travels to a copy in another process (a Ray worker):
the copy, pointed at an address where nothing listens, still knows how to read a slot, the
context and the model's identity, so it sent no probe of its own."""

from __future__ import annotations

import pickle

from tests.support.llama_server import MODEL_ID
from tests.support.serve_process import free_port
from veriscale.models.uri import load_backend


def test_a_copy_that_adopts_the_probed_state_needs_no_probe(llama_server) -> None:
    probed = load_backend(f"{llama_server}#{MODEL_ID}")
    copy = load_backend(f"http://127.0.0.1:{free_port()}/v1#{MODEL_ID}")  # nothing answers there
    try:
        state = pickle.loads(pickle.dumps(probed.probed_state()))  # as Ray hands it over
        copy.adopt_probed_state(state)
        assert copy.read_plan() == probed.read_plan()
        assert copy.context_size() == probed.context_size()
        assert copy.fingerprint().split("#", 1)[1] == probed.fingerprint().split("#", 1)[1]  # model id, weights, read
    finally:
        probed.close(), copy.close()
