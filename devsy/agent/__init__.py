"""The in-guest agent (an SSH server over stdio, built as one zipapp) and its delivery into a workspace.

Host side: `lock` (pinned wheels), `wheels` (download cache), `build` (the zipapp), `artifact` (which file to
deliver), `delivery` (stream it into the guest), `install` (deliver + set up + remember where), `provider_bundle`
(provider executables as single files, built the same way). Guest side: `boot` (unpack the bundled wheels on first
run) and the `guest` package (the agent itself, Python >= 3.9, stdlib + paramiko; on a remote machine it also
downloads, verifies and runs a workspace's runtime: `download`, `runtime_install`, `runtime_serve`).
"""
