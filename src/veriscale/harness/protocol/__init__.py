"""The verification protocol: resolve ‖ challenge → adjudicate → deliver, on one task or many.

``phases`` (the one phase vocabulary: ``PHASES``, ``RECORD_KIND``, skill-session names and
aliases, ``protocol_phase``), ``layout`` (``RunLayout``: every path inside a run folder),
``records`` (schema-checked ledgers, ``finish.json`` and ``repair.json``; schemas in
``protocol/schemas/``), ``gate`` (the delivery gate: base files kept, office files that point
outside themselves refused), ``prompt_files`` (the Markdown prompt templates in
``protocol/prompts/`` and the texts put into them),
``task_protocol`` (``ProtocolConfig``, ``run_protocol``: one task) and ``runner`` (many tasks
in parallel, recorded in the store).
"""
