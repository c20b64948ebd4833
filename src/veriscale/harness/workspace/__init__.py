"""Task workspaces: the on-disk contract of a materialised task and how one is made.

``contract`` (``TaskWorkspace``, folder names such as ``ROLLOUTS_DIR``, ``archive_path``),
``materialize`` (``materialize``: copy a source task into a blind workspace with shuffled
rollout labels and archived scores), ``views`` (text views of xlsx/docx/pdf files written as
sidecars), ``view_worker`` (views rendered in a child process with a deadline), ``zip_limits``
(the caps on what the host inflates from a zip or pdf, counted while streaming) and
``safe_copy`` (link-refusing copy and bounded zip extraction).
"""
