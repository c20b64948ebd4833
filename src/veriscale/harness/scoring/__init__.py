"""Scoring: grade what runs delivered with a user-supplied grader, with bootstrap intervals.

``grader`` (the grader contract: ``GraderCommand``, ``parse_grader_output``), ``delivery``
(``read_run``, ``explicit_delivery``, ``read_archive``), ``score`` (``score_deliveries``,
``write_report``: select-only or re-graded revision gain per task and in aggregate) and
``bootstrap`` (``bootstrap_mean``: seeded percentile-bootstrap intervals).
"""
