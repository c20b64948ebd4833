"""Claim maps: what the rollouts' deliverables assert and where they disagree.

``extract`` (``extract_claims``: claims from csv/json/xlsx/docx/pdf/text files, each read by
``extract_worker`` in a child under the text view's caps and a budget of claims), ``claim_map``
(``build_claim_map``, ``build_agenda``, ``write_claim_map``: classify claims as consensus,
disputed or omitted and rank the disputed ones; schemas in ``claims/schemas/``) and ``report``
(``render_markdown``: the short ``claims.md`` summary).
"""
