"""``veriscale serve``: REST jobs over the gateway, runs and calls from the store, live progress
by server-sent events, and the dashboard that shows the evidence behind every verdict.

Modules: ``security`` (host, origin, token, body-size checks and headers), ``jobs`` (the jobs
table and its workers), ``job_kinds`` (what each job accepts and runs), ``views`` (what each
dashboard page reads from the store), ``harness_view`` (a harness run's folder, read without
following links), ``stream`` (server-sent events), ``app`` (the routes), ``static/`` (the
dashboard: plain ES modules and CSS, no build step). See docs/SERVER.md.
"""
