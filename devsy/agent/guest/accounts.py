"""Who a session runs as: the SSH user name resolved in the guest's passwd, and how to become that user."""

from __future__ import annotations

import os
import pwd
from dataclasses import dataclass


class AccountError(Exception):
    """The requested user cannot run a session here; the message is shown to the SSH client."""


@dataclass(frozen=True)
class Account:
    name: str
    uid: int
    gid: int
    groups: tuple[int, ...]
    home: str
    shell: str

    def popen_identity(self) -> dict:
        """Keyword arguments for subprocess.Popen that switch to this account (empty when we already are it)."""
        if os.geteuid() != 0 or (self.uid == 0 and os.getegid() == self.gid):
            return {}
        return {"user": self.uid, "group": self.gid, "extra_groups": list(self.groups)}


def _from_pwd(entry: pwd.struct_passwd) -> Account:
    try:
        groups = tuple(os.getgrouplist(entry.pw_name, entry.pw_gid))
    except OSError:
        groups = (entry.pw_gid,)
    shell = entry.pw_shell if entry.pw_shell and os.access(entry.pw_shell, os.X_OK) else "/bin/sh"
    return Account(entry.pw_name, entry.pw_uid, entry.pw_gid, groups, entry.pw_dir or "/", shell)


def lookup(name: str) -> Account:
    """The account called `name` (or with that numeric uid)."""
    try:
        entry = pwd.getpwuid(int(name)) if name.isdigit() else pwd.getpwnam(name)
    except KeyError:
        raise AccountError("no user %r in this workspace's /etc/passwd" % name) from None
    return _from_pwd(entry)


def session_account(requested: str) -> Account:
    """As root: any existing user (default root). Otherwise only ourselves: we cannot switch users."""
    if os.geteuid() == 0:
        return lookup(requested or "root")
    try:
        me = _from_pwd(pwd.getpwuid(os.geteuid()))
    except KeyError:
        raise AccountError("the agent's own uid %d has no passwd entry" % os.geteuid()) from None
    if requested and requested not in (me.name, str(me.uid)):
        raise AccountError("the agent runs as %s and cannot start a session as %r" % (me.name, requested))
    return me
