"""Rewards for RL trainers: group-relative verifier rewards, progress shaping, trainer adapters.

    from veriscale.rewards import BatchRewarder, TRLReward, shaped_rewards
    BatchRewarder(verifier).rewards(prompts, responses)       # the core every adapter calls
    GRPOTrainer(..., reward_funcs=TRLReward(verifier))        # TRL (veriscale.rewards.trl)
    shaped_rewards(env_rewards, progress_values, lam=0.5)     # dense per-step rewards

veRL: ``veriscale.rewards.verl.compute_score``; verifiers: ``veriscale.rewards.verifiers_env``;
OpenRLHF: ``veriscale serve-reward`` (``veriscale.rewards.server``).
"""

from veriscale.rewards.batch import BatchRewarder, RewardBatch
from veriscale.rewards.group import GroupRewarder, GroupResult, bradley_terry_rewards, groups_by_prompt
from veriscale.rewards.shaping import ProgressShaper, shaped_rewards
from veriscale.rewards.trl import AsyncTRLReward, TRLReward

__all__ = ["AsyncTRLReward", "BatchRewarder", "GroupResult", "GroupRewarder", "ProgressShaper", "RewardBatch",
           "TRLReward", "bradley_terry_rewards", "groups_by_prompt", "shaped_rewards"]
