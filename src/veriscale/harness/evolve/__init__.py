"""Skill evolution (``veriscale harness evolve``): scored runs with grader feedback in, reviewed skills out.

``failures`` reads the runs, ``leak_check`` forbids the values graders, archives and answer keys
hold, ``session`` asks the model, ``proposals`` reviews each proposal as a diff, ``store`` versions
the accepted skills, ``evaluate`` scores them on held-out tasks only; ``evolve`` ties them together::

    from veriscale.harness.evolve.evolve import evolve_skills, write_report
    report = evolve_skills([Path("runs/score.json")], Path("skills"), backend, answer_keys=Path("keys"))
"""
