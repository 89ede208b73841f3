"""Claude-Code-compatible permission rules and the decision for one tool call.

- ``rules``      ``Rule``, ``parse_rule``, ``rule_matches``: ``Tool`` / ``Tool(specifier)`` rules.
- ``bash``       splitting a Bash command into the simple commands a shell would run.
- ``pathrules``  gitignore-style Read/Edit path rules.
- ``decide``     ``Policy`` from the config's spec, ``decide`` (deny > ask > allow), grant rules,
                 ``explain`` input and one-line call summaries.

Pure and stdlib-only: the hook imports it on every tool call.
"""
