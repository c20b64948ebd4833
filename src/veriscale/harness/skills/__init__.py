"""The skill library: method texts (``<stage>-<name>/SKILL.md``) and scripts handed to sessions.

``library`` (``load_skills``, ``skill_index``, ``all_skills``, ``BUILTIN_SKILLS_DIR``: this
folder, whose ``<stage>-<name>/`` subfolders are the built-in skills). The skill scripts are
standalone programs that sessions run in the jail, so they import nothing from veriscale.
"""
