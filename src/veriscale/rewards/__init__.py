"""Rewards for RL trainers: group-relative verifier rewards and progress shaping.

    from veriscale.rewards import GroupRewarder, shaped_rewards
    GroupRewarder(verifier).rewards(prompt, completions)     # one group of completions
    shaped_rewards(env_rewards, progress_values, lam=0.5)    # dense per-step rewards

Trainer adapters (TRL, verifiers, veRL, OpenRLHF) build on these.
"""

from veriscale.rewards.group import GroupRewarder, GroupResult, bradley_terry_rewards, groups_by_prompt
from veriscale.rewards.shaping import ProgressShaper, shaped_rewards

__all__ = ["GroupResult", "GroupRewarder", "ProgressShaper", "bradley_terry_rewards", "groups_by_prompt",
           "shaped_rewards"]
