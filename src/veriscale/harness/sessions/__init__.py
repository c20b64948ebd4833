"""Agent sessions: one model-driven session of a protocol phase, from prompt to record.

``agent`` (``AgentSession``: the built-in tool-calling loop and its ``Transcript``), ``tools``
(``ToolBox``: list/read/write/run for a session, confined to its folders), ``executors``
(``BuiltinExecutor``, ``PiExecutor``, ``make_executor``: run a ``SessionSpec``) and ``result``
(``SessionOutcome`` / ``SessionResult``: how a session ended and what it cost).
"""
