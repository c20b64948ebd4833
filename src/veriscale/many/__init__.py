"""Many decisions at once: ``select-many`` over a pool of tasks (:mod:`~veriscale.many.select_many`),
one task's decision (:mod:`~veriscale.many.decisions`) and the picks.jsonl it writes
(:mod:`~veriscale.many.picks_file`).

    from veriscale.many.select_many import jobs_of, select_many
"""
