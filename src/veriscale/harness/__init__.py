"""The agentic harness: verify N rollouts of a long task with file deliverables and no answer key.

Sub-packages, in the order a run uses them: ``workspace`` (materialise a task folder), ``claims``
(the claim map and agenda), ``protocol`` (resolve ‖ challenge → adjudicate → deliver, the run
folder, records, the delivery gate, prompts and the many-task runner), ``sessions`` (the agent
loop, its tools and the executors), ``jail`` (the bubblewrap sandbox sessions run in), ``skills``
(method texts and scripts handed to sessions) and ``scoring`` (grade deliveries). ``jsonfiles``
holds the JSON read/write helpers they share, ``safe_fs`` the link-refusing reads of folders a
session wrote and path containment, ``safe_write`` the matching writes and removals, and
``safe_names`` the one filter for names a session wrote. Import from the modules, e.g.
``from veriscale.harness.protocol.protocol_runner import run_tasks``.
"""
