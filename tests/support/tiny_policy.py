"""A tiny GRPO policy and tokenizers built in memory (no downloads), for the trainer tests and
the rewards benchmark.

    trainer = grpo_trainer(reward, tmp_path, steps=2)     # a real trl.GRPOTrainer
    trainer.train()
    tokenizer = byte_tokenizer()                          # decode(encode(text)) == text (veRL, OpenRLHF)

The policy is a randomly initialised one-layer Llama; its tokenizer is a byte-level BPE trained
here on a few lines, with many tokens that carry '+' marks so that a graded test double sees
completions that differ. Its completions are noise, as a policy's are at step 0.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

PROMPTS = ["Compute 17 * 23 and show the steps.", "Name the capital of France."]
SOLUTIONS = ["391", "Paris"]


def byte_tokenizer():
    """A byte-level tokenizer built in memory (no downloads): decode(encode(text)) == text."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"<pad>": 0, "<eos>": 1}
    for ch in sorted(pre_tokenizers.ByteLevel.alphabet()):
        vocab[ch] = len(vocab)
    bpe = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    bpe.decoder = decoders.ByteLevel()
    return PreTrainedTokenizerFast(tokenizer_object=bpe, pad_token="<pad>", eos_token="<eos>")


def tiny_policy():
    """A one-layer Llama and its tokenizer, built in memory."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    bpe = Tokenizer(models.BPE(unk_token="<unk>"))
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    lines = PROMPTS * 20 + ["17 * 23 = 391", "Paris, France"] * 20 + ["+ ++ +++ a+ b+ +c 1+1"] * 60
    bpe.train_from_iterator(lines,
                            trainers.BpeTrainer(vocab_size=64, special_tokens=["<pad>", "<eos>", "<unk>"]))
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=bpe, pad_token="<pad>", eos_token="<eos>",
                                        unk_token="<unk>")
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=256,
                         pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id,
                         bos_token_id=tokenizer.eos_token_id)
    return LlamaForCausalLM(config), tokenizer


def grpo_trainer(reward: Any, tmp_path: Path, steps: int = 2, generations: int = 4, completion_tokens: int = 8):
    """A GRPOTrainer on the tiny policy: one prompt's ``generations`` completions per step."""
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    model, tokenizer = tiny_policy()
    args = GRPOConfig(output_dir=str(tmp_path / "grpo"), per_device_train_batch_size=generations,
                      num_generations=generations, max_completion_length=completion_tokens, max_steps=steps, learning_rate=1e-3, logging_steps=1,
                      report_to="none", use_cpu=True, bf16=False, save_strategy="no", seed=0)
    data = Dataset.from_dict({"prompt": PROMPTS * 2, "solution": SOLUTIONS * 2})
    return GRPOTrainer(model=model, reward_funcs=reward, args=args, train_dataset=data, processing_class=tokenizer)
