"""The harness fixtures (materialised fixture tasks) for the harness crash points."""

from tests.harness.conftest import materialized  # noqa: F401 - a fixture, re-exported
