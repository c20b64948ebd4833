"""veriscale's veRL reward functions, called by veRL's own reward code (veRL 0.9.1, installed --no-deps).

Each test builds a real ``DataProto`` (prompt/response token tensors from a byte-level
tokenizer built in memory, and the non-tensor columns veRL's datasets carry), loads our
function the way veRL does (``get_custom_reward_fn`` with ``custom_reward_function.path`` and
``.name``) and lets veRL's managers call it:

- the reward loop: ``RewardLoopWorker.compute_score_batch`` -> ``NaiveRewardManager.run_single``
  (verl/experimental/reward_loop/), the path veRL 0.9's trainer takes;
- the legacy ``verl.workers.reward_manager`` ``NaiveRewardManager`` and ``BatchRewardManager``.

The judge is the graded test double (``GradedModel``: more '+' marks, a better label) where a
test asserts an ordering, and the real embedded model in one test.
"""

from __future__ import annotations

import asyncio
import math
import textwrap

import numpy as np
import pytest
import torch

from tests.rewards.test_group_and_shaping import GradedModel
from tests.support.tiny_policy import byte_tokenizer
from veriscale.errors import UserError
from veriscale.rewards import BatchRewarder, configure
from veriscale.rewards.batch import NEUTRAL_REWARD
from veriscale.rewards import verl as verl_adapter
from veriscale.rewards.verl import VerificationFailed, make_compute_score
from veriscale.verify.criteria import load_criteria
from veriscale.verify.reward import Verifier

QUESTION = "What is 17 * 23?"
CRITERIA = ["Correctness", "Instruction following", "Completeness"]  # the 'general' set
EXTRAS = {"score", "veriscale_failed", "veriscale_group_size", "veriscale_pointwise", "veriscale_reward_length_corr",
          *(f"veriscale_{c}" for c in CRITERIA)}


def data_proto(tokenizer, rows):
    """A DataProto as veRL's rollout leaves it: left-padded prompts, right-padded responses + eos.

    ``rows``: (question, response, ground_truth) triples.
    """
    from verl import DataProto

    prompts = [tokenizer(f"user: {q}\nassistant:", add_special_tokens=False)["input_ids"] for q, _, _ in rows]
    responses = [tokenizer(r, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id] for _, r, _ in rows]
    p_len, r_len = max(map(len, prompts)), max(map(len, responses))
    pad = tokenizer.pad_token_id
    prompt_ids = torch.tensor([[pad] * (p_len - len(p)) + p for p in prompts])
    response_ids = torch.tensor([r + [pad] * (r_len - len(r)) for r in responses])
    mask = torch.tensor([[0] * (p_len - len(p)) + [1] * len(p) + [1] * len(r) + [0] * (r_len - len(r))
                         for p, r in zip(prompts, responses)])
    return DataProto.from_dict(
        tensors={"prompts": prompt_ids, "responses": response_ids, "attention_mask": mask,
                 "input_ids": torch.cat([prompt_ids, response_ids], dim=1)},
        non_tensors={
            "data_source": np.array(["veriscale/test"] * len(rows), dtype=object),
            "reward_model": np.array([{"style": "model", "ground_truth": g} for _, _, g in rows], dtype=object),
            "extra_info": np.array([{"split": "train", "index": i, "question": q} for i, (q, _, _) in enumerate(rows)],
                                   dtype=object),
        })


def verl_config(tokenizer_dir, path: str, name: str, **reward_kwargs):
    """The parts of veRL's trainer config that its reward code reads (verl/trainer/config/reward/reward.yaml)."""
    from omegaconf import OmegaConf

    return OmegaConf.create({
        "actor_rollout_ref": {"model": {"path": str(tokenizer_dir), "tokenizer_path": None}},
        "reward": {
            "num_workers": 1,
            "custom_reward_function": {"path": path, "name": name, "reward_kwargs": reward_kwargs},
            "reward_manager": {"source": "register", "name": "naive",
                               "module": {"path": None, "name": "custom_reward_manager"}},
            "reward_model": {"enable": False},
            "sandbox_fusion": {"url": None},
        },
    })


@pytest.fixture(scope="module")
def tokenizer():
    return byte_tokenizer()


@pytest.fixture()
def tokenizer_dir(tokenizer, tmp_path):
    """The tokenizer saved where veRL's reward worker loads its tokenizer from (actor_rollout_ref.model.path)."""
    tokenizer.save_pretrained(tmp_path / "policy")
    return tmp_path / "policy"


@pytest.fixture()
def reward_file(tmp_path):
    """A user's reward file, as veRL loads it by path: our functions bound to a graded test double."""
    path = tmp_path / "my_reward.py"
    path.write_text(textwrap.dedent("""
        from tests.rewards.test_group_and_shaping import GradedModel
        from veriscale.rewards.verl import make_compute_score
        from veriscale.verify.reward import Verifier

        model = GradedModel()
        model.fail_when = lambda request: "FAIL" in model._slot_text(request)
        scorer = make_compute_score(Verifier(model, scale="letters:5"))
        compute_score = scorer.compute_score
        compute_score_async = scorer.compute_score_async
        compute_score_batch = scorer.compute_score_batch
    """))
    return str(path)


def reward_loop(config, data):
    """veRL's reward loop worker, as its Ray actor runs it: built and awaited on one event loop."""
    from verl.experimental.reward_loop.reward_loop import RewardLoopWorker

    async def run():
        worker = RewardLoopWorker(config)
        return worker, await worker.compute_score_batch(data)

    return asyncio.run(run())


ROWS = [(QUESTION, "391", "391"), (QUESTION, "391 + + +", "391"), ("Name the capital of France.", "Paris +", "Paris"),
        (QUESTION, "371 +", "391")]


@pytest.mark.parametrize("name, awaited", [("compute_score_async", True), ("compute_score", False)])
def test_the_reward_loop_calls_our_function_for_each_rollout(tokenizer, tokenizer_dir, reward_file, name,
                                                             awaited) -> None:
    from verl.experimental.reward_loop.reward_manager import NaiveRewardManager

    data = data_proto(tokenizer, ROWS)
    worker, outputs = reward_loop(verl_config(tokenizer_dir, reward_file, name), data)
    assert worker.reward_manager.is_async_reward_score is awaited  # veRL awaits a coroutine function
    scores = [out["reward_score"] for out in outputs]
    for out in outputs:
        assert set(out["reward_extra_info"]) == EXTRAS
        assert out["reward_extra_info"]["veriscale_failed"] == 0.0
        assert out["reward_extra_info"]["veriscale_group_size"] == 1.0  # one rollout at a time: pointwise
        assert all(0.0 <= out["reward_extra_info"][f"veriscale_{c}"] <= 1.0 for c in CRITERIA)
    assert scores[0] < scores[3] < scores[1]  # graded by '+' marks, decoded from veRL's response tokens
    rm_scores = NaiveRewardManager.assemble_rm_scores(data, scores)  # what veRL does with them
    last = data.batch["attention_mask"][:, data.batch["prompts"].shape[1]:].sum(-1) - 1
    assert rm_scores.sum(-1).tolist() == pytest.approx(scores)
    assert rm_scores[torch.arange(len(ROWS)), last].tolist() == pytest.approx(scores)


def test_our_module_loads_by_file_path_and_by_pkg_for_the_legacy_manager(tokenizer, tokenizer_dir,
                                                                          monkeypatch) -> None:
    """veRL loads ``custom_reward_function.path`` as a file (not in sys.modules) or as pkg://."""
    from verl.trainer.ppo.reward import get_custom_reward_fn
    from verl.workers.reward_manager import NaiveRewardManager

    model = GradedModel()
    monkeypatch.setattr(configure, "_default", BatchRewarder(Verifier(model, scale="letters:5")))
    data = data_proto(tokenizer, ROWS)
    results = []
    for path in (verl_adapter.__file__, "pkg://veriscale.rewards.verl"):
        fn = get_custom_reward_fn(verl_config(tokenizer_dir, path, "compute_score"))
        manager = NaiveRewardManager(tokenizer=tokenizer, num_examine=0, compute_score=fn)
        results.append(manager(data, return_dict=True))
    by_file, by_pkg = results
    assert torch.equal(by_file["reward_tensor"], by_pkg["reward_tensor"])
    scores = by_file["reward_extra_info"]["score"]
    assert set(by_file["reward_extra_info"]) == EXTRAS and len(scores) == len(ROWS)
    assert by_file["reward_tensor"].sum(-1).tolist() == pytest.approx(scores)
    assert scores[0] < scores[3] < scores[1]
    assert model.calls  # the default rewarder (here the test double) did the judging


def test_the_batch_manager_ranks_the_responses_of_each_prompt(tokenizer, tokenizer_dir, reward_file) -> None:
    from verl.trainer.ppo.reward import get_custom_reward_fn
    from verl.workers.reward_manager import BatchRewardManager

    rows = [(QUESTION, "391", "391"), ("Name the capital of France.", "Paris + +", "Paris"),
            (QUESTION, "391 + +", "391"), ("Name the capital of France.", "Lyon", "Paris"),
            (QUESTION, "17*23 = 391 +", "391")]
    data = data_proto(tokenizer, rows)
    fn = get_custom_reward_fn(verl_config(tokenizer_dir, reward_file, "compute_score_batch"))
    result = BatchRewardManager(tokenizer=tokenizer, num_examine=0, compute_score=fn)(data, return_dict=True)
    info = result["reward_extra_info"]
    scores = info["score"]
    assert info["veriscale_group_size"] == [3.0, 2.0, 3.0, 2.0, 3.0]
    assert scores[0] < scores[4] < scores[2] and scores[3] < scores[1]  # ranked within each prompt's group
    assert (scores[0] + scores[2] + scores[4]) / 3 == pytest.approx(0.5)  # Bradley–Terry rewards are centred
    assert info["veriscale_failed"] == [0.0] * 5
    assert result["reward_tensor"].sum(-1).tolist() == pytest.approx(scores)
    assert data.batch["acc"].tolist() == pytest.approx(scores)  # veRL's own copy of the scores


def test_veRL_takes_neither_none_nor_nan_as_a_score(tokenizer) -> None:
    """Why a failed verification is raised (or a flagged neutral score), never None or NaN, in veRL."""
    from verl.experimental.reward_loop.reward_manager import NaiveRewardManager
    from verl.trainer.ppo.core_algos import compute_grpo_outcome_advantage

    data = data_proto(tokenizer, ROWS[:2])
    with pytest.raises((TypeError, RuntimeError)):
        NaiveRewardManager.assemble_rm_scores(data, [0.7, None])
    rewards = NaiveRewardManager.assemble_rm_scores(data, [0.7, math.nan])
    mask = data.batch["attention_mask"][:, data.batch["prompts"].shape[1]:]
    advantages, _ = compute_grpo_outcome_advantage(rewards, mask, np.array(["group", "group"], dtype=object))
    assert torch.isnan(advantages[0]).all()  # one NaN poisons the whole group's advantages


def test_a_failed_verification_raises_or_gets_a_flagged_neutral_score(tokenizer, tokenizer_dir,
                                                                        reward_file) -> None:
    from verl.trainer.ppo.reward import get_custom_reward_fn
    from verl.workers.reward_manager import BatchRewardManager, NaiveRewardManager

    france = "Name the capital of France."
    rows = [(QUESTION, "391 +", "391"), (france, "FAIL Paris", "Paris"), (QUESTION, "391 + + +", "391"),
            (QUESTION, "", "391"), (france, "Paris +", "Paris")]
    data = data_proto(tokenizer, rows)
    with pytest.raises(VerificationFailed, match=r"could not verify the response \(.+\).*on_failure=neutral"):
        reward_loop(verl_config(tokenizer_dir, reward_file, "compute_score_async"), data)

    neutral = verl_config(tokenizer_dir, reward_file, "compute_score_batch", on_failure="neutral")
    info = BatchRewardManager(tokenizer=tokenizer, num_examine=0,
                              compute_score=get_custom_reward_fn(neutral))(data, return_dict=True)["reward_extra_info"]
    # the empty response; and France's group, whose one failed judgement leaves the group unranked
    assert info["veriscale_failed"] == [0.0, 1.0, 0.0, 1.0, 1.0]
    assert info["score"][0] < info["score"][2]
    assert info["score"][3] == pytest.approx((info["score"][0] + info["score"][2]) / 2)  # a GRPO advantage of 0
    assert info["score"][1] == info["score"][4] == NEUTRAL_REWARD
    assert all(math.isnan(info[f"veriscale_{c}"][i]) for c in CRITERIA for i in (1, 3, 4))

    single = verl_config(tokenizer_dir, reward_file, "compute_score", on_failure="neutral")
    info = NaiveRewardManager(tokenizer=tokenizer, num_examine=0,
                              compute_score=get_custom_reward_fn(single))(data, return_dict=True)["reward_extra_info"]
    assert info["veriscale_failed"] == [0.0, 1.0, 0.0, 1.0, 0.0]  # pointwise: only the failed one and the empty one
    assert info["score"][1] == info["score"][3] == NEUTRAL_REWARD


@pytest.mark.parametrize("call, needle", [
    (lambda s: s.compute_score("d", "391", "391", {"prompt": QUESTION}),
     "extra_info has no 'question' (the prompt the response answers; its keys: prompt)"),
    (lambda s: s.compute_score("d", "391", "391", {"prompt": QUESTION}, prompt_key="problem"), "no 'problem'"),
    (lambda s: s.compute_score("d", "391", "391", None), "extra_info is NoneType, not a dict"),
    (lambda s: s.compute_score("d", None, "391", {"question": QUESTION}), "solution_str is NoneType"),
    (lambda s: s.compute_score("d", "391", "391", {"question": "  "}), "extra_info['question'] is empty"),
    (lambda s: s.compute_score("d", "391", "391", {"question": 7}), "extra_info['question'] is int"),
    (lambda s: s.compute_score("d", "391", "391", {"question": QUESTION}, on_faliure="neutral"),
     "unknown setting 'on_faliure'"),
    (lambda s: s.compute_score("d", "391", "391", {"question": QUESTION}, on_failure="zero"),
     "on_failure 'zero' is unknown"),
    (lambda s: s.compute_score_batch(["d"] * 2, ["a", "b"], ["x"] * 2, [{"question": QUESTION}]),
     "differ in length (2 data_sources, 2 solution_strs, 2 ground_truths, 1 extra_infos)"),
    (lambda s: s.compute_score_batch("d", ["a"], ["x"], [{"question": QUESTION}]), "data_sources must be a list"),
    (lambda s: s.compute_score_batch(["d"], ["a"], ["x"], [{"q": QUESTION}]), "extra_infos[0] has no 'question'"),
])
def test_bad_input_is_one_sentence_naming_it(call, needle) -> None:
    model = GradedModel()
    with pytest.raises(UserError) as err:
        call(make_compute_score(Verifier(model, scale="letters:5")))
    assert needle in str(err.value)
    assert not model.calls  # refused before any judging


def test_chat_prompts_numpy_columns_and_the_reference() -> None:
    model = GradedModel()
    scorer = make_compute_score(Verifier(model, scale="letters:5"))
    chat = np.array([{"role": "user", "content": QUESTION}], dtype=object)  # parquet rows read back as arrays
    row = scorer.compute_score("d", "391 +", np.array(["391", "three hundred ninety-one"]), {"question": chat})
    assert row["veriscale_failed"] == 0.0 and 0.0 < row["score"] < 1.0
    judged = model.calls[0].messages[-1].content
    assert "user: What is 17 * 23?" in judged and "three hundred ninety-one" in judged and "Reference answer" in judged
    model.calls.clear()
    scorer.compute_score("d", "391 +", "391", {"question": QUESTION}, use_ground_truth=False)
    assert "Reference answer" not in model.calls[0].messages[-1].content


@pytest.mark.embedded
def test_the_reward_loop_scores_rollouts_with_the_embedded_model(embedded_model, tokenizer, tokenizer_dir,
                                                                 monkeypatch) -> None:
    """Our module's own compute_score_async (pkg://), its default rewarder set to the real embedded model."""
    one = load_criteria("general").only(["Correctness"])  # one criterion: one model call per rollout
    monkeypatch.setattr(configure, "_default", BatchRewarder(Verifier(embedded_model, scale="letters:5", criteria=one)))
    rows = [(QUESTION, "17 * 23 = 391", "391"), ("Name the capital of France.", "Paris", "Paris")]
    data = data_proto(tokenizer, rows)
    _, outputs = reward_loop(verl_config(tokenizer_dir, "pkg://veriscale.rewards.verl", "compute_score_async"), data)
    for out in outputs:
        assert 0.0 < out["reward_score"] < 1.0
        assert out["reward_extra_info"]["veriscale_failed"] == 0.0
        assert out["reward_extra_info"]["veriscale_Correctness"] == pytest.approx(out["reward_score"])
    assert configure._default.verifier.usage.model_calls == 2
