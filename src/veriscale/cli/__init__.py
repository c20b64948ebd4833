"""The ``veriscale`` command: one sub-command per user job, each in its own module here."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

app = typer.Typer(
    name="veriscale",
    help="Tell which run of your AI agent to trust.\n\nExample: veriscale compare task.md a.md b.md --json",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


@app.callback()
def main(
    config: Optional[Path] = typer.Option(None, "--config", help="Config file (TOML; default: <user config dir>/veriscale/config.toml, or $VERISCALE_CONFIG)."),
    rpm: Optional[int] = typer.Option(None, "--rpm", help="Requests a minute per model endpoint (config gateway.rpm; 0: no limit)."),
    tpm: Optional[int] = typer.Option(None, "--tpm", help="Prompt tokens a minute per model endpoint (config gateway.tpm; 0: no limit)."),
    deadline: Optional[float] = typer.Option(None, "--deadline", help="Seconds one model call may take (config gateway.deadline_s; 0: none)."),
    routing: Optional[str] = typer.Option(None, "--routing", help="affinity (same prompt prefix, same endpoint) or round_robin, for several --model endpoints."),
    threads: Optional[int] = typer.Option(None, "--threads", help="CPU threads of the embedded model (config embedded.threads; 0: one per core; a model URI's ?threads=N wins)."),
    max_input_mb: Optional[float] = typer.Option(None, "--max-input-mb", help="Largest input file or stdin read, in MiB, also after gunzip (config inputs.max_mb; default 128)."),
    image_max_mb: Optional[float] = typer.Option(None, "--image-max-mb", help="Largest image or video file a verdict reads, in MiB (config images.max_mb; default 20)."),
    image_max_side: Optional[int] = typer.Option(None, "--image-max-side", help="Images are shrunk to this many pixels on their longer side before they are sent (config images.max_side; default 1024; 0: as read)."),
    frames: Optional[str] = typer.Option(None, "--frames", help="Which frames of a video a verdict sees: N evenly spaced (default 8), every:S seconds, or keys (config images.frames)."),
    run_stale_s: Optional[float] = typer.Option(None, "--run-stale-s", help="Heartbeat age in seconds after which a run with no live process is interrupted (config runs.stale_s; default 30)."),
    criteria_dir: Optional[Path] = typer.Option(None, "--criteria-dir", help="A folder of your own criteria packs (NAME.md), listed beside the built-in ones (config criteria.dir; $VERISCALE_CRITERIA_DIR)."),
    store_wait: Optional[float] = typer.Option(None, "--store-wait", help="Seconds a store write waits for another process's lock before it fails (config storage.wait_s; default 30)."),
    injection_detect: Optional[str] = typer.Option(None, "--injection-detect", help="on or off: flag candidates whose text reads as an injection (injection_suspected with its span; config injection.detect)."),
    injection_policy: Optional[str] = typer.Option(None, "--injection-policy", help="What select does with a suspected candidate: none (default), lose_ties or exclude (config injection.policy)."),
    injection_mitigation: Optional[str] = typer.Option(None, "--injection-mitigation", help="How judge prompts resist injected text: none, neutralise, warn or both (config injection.mitigation)."),
    zip_member_mb: Optional[float] = typer.Option(None, "--zip-member-mb", help="MiB the host inflates from one zip member or pdf stream of a rollout (config zip.member_mb; default 32)."),
    zip_file_mb: Optional[float] = typer.Option(None, "--zip-file-mb", help="MiB the host inflates from one rollout file, all members together (config zip.file_mb; default 128)."),
    zip_members: Optional[int] = typer.Option(None, "--zip-members", help="Entries one zip (xlsx, docx, pptx, rollout zip) may hold (config zip.members; default 10000)."),
    view_timeout_s: Optional[float] = typer.Option(None, "--view-timeout-s", help="Seconds one text view of an office or pdf file may take (config view.timeout_s; default 60)."),
    view_memory_mb: Optional[float] = typer.Option(None, "--view-memory-mb", help="MiB of address space the text-view worker may add (config view.memory_mb; default 2048)."),
    handback_max_files: Optional[int] = typer.Option(None, "--handback-max-files", help="Files and folders a session's hand-back may carry (config handback.max_files; default 20000)."),
    handback_max_depth: Optional[int] = typer.Option(None, "--handback-max-depth", help="Folder depth a session's hand-back keeps (config handback.max_depth; default 64)."),
    model_mismatch: Optional[str] = typer.Option(None, "--model-mismatch", help="fail (default) or note: what a reply naming another model than the one asked is, a failed call or a scored one with a note (config scoring.model_mismatch; $VERISCALE_MODEL_MISMATCH)."),
    joint: Optional[bool] = typer.Option(None, "--joint/--no-joint", help="Joint scoring: one model call reads every criterion's grade (and both responses of a pair), each at its own slot (config scoring.joint; $VERISCALE_JOINT)."),
    quiet: Optional[bool] = typer.Option(None, "--quiet/--no-quiet", help="No progress bars or lines and no informational notes on stderr (config output.quiet; $VERISCALE_QUIET). Errors still print their sentence and exit non-zero, warnings still print, and so does the notice that verdicts come from the weak embedded model: quiet never hides that."),
) -> None:
    """Tell which run of your AI agent to trust."""
    given = dict(locals())  # every option, by parameter name
    from veriscale.cli import settings
    from veriscale.cli.common import user_errors
    from veriscale.cli.setting_flags import setting_flags
    from veriscale.engine.run_scope import install_sigterm_handler

    install_sigterm_handler()  # SIGTERM ends the command's run (cancelled) like Ctrl-C, not silently
    with user_errors():
        # every global flag, by setting name; the library reads a flag's or the file's choice through
        # veriscale.settings.value (configure hands it over), else the environment, else the default.
        # The same flags given after the sub-command are resolved again there (cli/setting_flags.py).
        # The config file's note waits for the sub-command's own flags (a --quiet there silences it).
        settings.configure(config, setting_flags(given), defer_notes=True)


def _register_all() -> None:
    from veriscale.cli import commands_registry
    from veriscale.cli.setting_flags import install

    for register in commands_registry.registrars():
        register(app)
    install(app, main)  # every global option after the sub-command too; unused flags refused


_register_all()
