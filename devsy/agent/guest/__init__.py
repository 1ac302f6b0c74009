"""The agent that runs inside the guest (Python >= 3.9; stdlib + paramiko). Bundled into the zipapp as `devsy_agent`.

Every module here uses relative imports only, so the same files work as `devsy.agent.guest` on the host (tests) and
as `devsy_agent` in the guest.
"""
