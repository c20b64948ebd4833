"""A setting's words in what the CLI and the server print: ``max_calls`` is ``--max-calls`` there.

Library messages name settings with :func:`veriscale.errors.setting`; everything the CLI prints
(errors, notes, warnings) goes through :func:`cli_text`, which spells them as flags::

    cli_text(str_with_setting_refs)   # '... raise --max-calls, or lower --repeats'
"""

from __future__ import annotations

from veriscale.errors import phrase

# setting name -> flag; a value given with the setting follows the flag (``--scale letters:20``).
FLAG_FOR: dict[str, str] = {
    "max_calls": "--max-calls",
    "deadline_s": "--deadline",
    "rpm": "--rpm",
    "tpm": "--tpm",
    "routing": "--routing",
    "threads": "--threads",
    "max_input_mb": "--max-input-mb",
    "run_stale_s": "--run-stale-s",
    "criteria_dir": "--criteria-dir",
    "store_wait_s": "--store-wait",
    "concurrency": "--concurrency",
    "redact": "--redact",
    "redact_secrets": "--no-redact",
    "model": "--model",
    "store": "--store",
    "config": "--config",
    "repeats": "--repeats",
    "criteria": "--criteria",
    "scale": "--scale",
    "reasoning": "--reasoning",
    "budget_tokens": "--budget-tokens",
    "budget": "--budget",
    "task": "--task",
    "limit": "--limit",
    "tasks": "--tasks",
    "tasks_at_once": "--tasks-at-once",
    "executor": "--executor",
    "address": "--address",
    "agent": "--agent",  # harness run's agent loop (builtin or pi)
    "batch": "--batch",  # select-many through the Batch API (veriscale.many.batch)
    "ray": "--ray",  # serve-reward on Ray (veriscale.rewards.ray_pool)
    "replicas": "--replicas",
    "sweep": "--sweep",
    "plot": "--plot",
    "no_jail": "--no-jail",
    "jail_output": "--jail-output",
    "jail_cpus": "--jail-cpus",
    "phase_timeout_s": "--phase-timeout",
    "skills": "--skills",
    "skills_dirs": "--skills",
    "task_file": "--task-file",
    "grader": "--grader",
    "grader_timeout_s": "--grader-timeout",
    "tolerance": "--tolerance",
    "bootstrap": "--bootstrap",
    "n_resamples": "--bootstrap",
    "select_only": "--select-only",
    "delivered": "--delivered",
    "base": "--base",
    "archive_dir": "--archive-dir",
    "answer_keys": "--answer-keys",  # harness evolve's leak check
    "all_tasks": "--all-tasks",
    "output": "--output",
    "checkpoints": "--checkpoints",
    "every": "--every",
    "stall_window": "--stall-window",
    "regression_drop": "--regression-drop",
    "done_threshold": "--done-threshold",
    "step_tokens": "--step-tokens",
    "mode": "--mode",
    "on_failure": "--on-failure",
    "group_size": "--group-size",
    "group_wait_s": "--group-wait",
    "host": "--host",
    "port": "--port",
    "token": "--token",
    "allow_dirs": "--allow-dir",
    "workers": "--workers",
    "proxy_n": "--proxy-n",
    "max_body": "--max-body",
    "method": "--method",
    "injection_detect": "--injection-detect",
    "injection_policy": "--injection-policy",
    "injection_mitigation": "--injection-mitigation",
    "group_scheme": "--group-scheme",
    "prices": "--prices",  # honest cost (veriscale.engine.prices)
    "zip_member_mb": "--zip-member-mb",
    "zip_file_mb": "--zip-file-mb",
    "zip_members": "--zip-members",
    "view_timeout_s": "--view-timeout-s",
    "view_memory_mb": "--view-memory-mb",
    "handback_max_files": "--handback-max-files",
    "handback_max_depth": "--handback-max-depth",
    "joint": "--joint",
    "model_mismatch": "--model-mismatch",
    "proxy_schedule": "--proxy-schedule",  # the proxy's pick (veriscale.proxy.pick)
    "reward_length_control": "--length-control",  # serve-reward (veriscale.rewards.length)
    "reward_answer_within": "--answer-within",  # serve-reward (veriscale.rewards.batching)
    "proxy_aliases": "--proxy-aliases",  # the proxy's model names (veriscale.proxy.settings)
    "proxy_budget": "--proxy-budget",  # the proxy's pick inside a budget (veriscale.proxy.budget_plan)
    "quiet": "--quiet",  # no progress and no informational note on stderr (veriscale.cli.common)
}


def flag_for(name: str, value: str | None) -> str:
    """``--flag`` (or ``--flag value``) for a setting; an unmapped name is printed as it is."""
    flag = FLAG_FOR.get(name, name)
    return flag if value is None else f"{flag} {value}"


def cli_text(text: str) -> str:
    """``text`` (a template or a :class:`~veriscale.errors.Worded`) with its settings spelled as flags."""
    return phrase(getattr(text, "template", text), flag_for)
