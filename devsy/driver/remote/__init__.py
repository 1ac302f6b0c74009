"""Remote machine providers (`agent.local: false`): the backend runs on another machine, reached through the
provider's exec command; the devsy agent there prepares and runs the workspace's runtime (see driver.py)."""
