"""What the launcher (``shim/planned.py``) and the service's planner (``service/planner.py``) send
each other over ``plan.sock``: one marshal'd request, one marshal'd answer (the protocol is in
``service/planner.py``'s docstring). Imports nothing: the launcher's start path reads it.
"""

PLAN_SOCKET = "plan.sock"
