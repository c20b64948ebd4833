"""The jail: the bubblewrap sandbox every session command runs in, and its host-side helpers.

``sandbox`` (``JailSpec``, ``run_jailed``, ``check_jail_available``), ``mounts`` (the bwrap
command line), ``limits`` (``JailLimits``, cgroups/rlimits, per-session uids), ``seccomp``,
``capture`` (bounded output capture), ``harvest`` (copy a session's output back safely),
``netjail`` (the model endpoint forwarded into the jail), ``relay_record`` (record relayed model
calls in the store); the link-refusing host reads and writes they use are ``harness.safe_fs``
and ``harness.safe_write``.
``jail_inside.py`` and ``jail_relay.py`` are standalone stdlib-only scripts run inside the
sandbox; they must stay side by side in this folder.
"""
