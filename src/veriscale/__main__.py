"""``python -m veriscale`` runs the CLI."""

from veriscale.cli import app

app()
