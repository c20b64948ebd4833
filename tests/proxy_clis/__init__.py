"""The real agent CLIs (Codex CLI, Claude Code) run through ``veriscale serve``'s proxy, offline."""
