"""Task workspaces: the on-disk contract of a materialised task and how one is made.

``contract`` (``TaskWorkspace``, folder names such as ``ROLLOUTS_DIR``, ``archive_path``),
``materialize`` (``materialize``: copy a source task into a blind workspace with shuffled
rollout labels and archived scores), ``views`` (text views of xlsx/docx/pdf files written as
sidecars), ``view_worker`` (views rendered in a child process with a deadline), ``zip_limits``
(the caps on what the host inflates from a zip or pdf, counted while streaming),
``office_content`` (the one content check of office files: external links, external
relationship targets other than hyperlinks, formulas into other workbooks and DTDs are refused)
and ``safe_copy`` (link-refusing copy and bounded zip extraction).
"""
