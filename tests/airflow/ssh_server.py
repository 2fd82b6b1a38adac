"""A real SSH server for the fleet tests (asyncssh's: the SSH protocol as sshd speaks it): public-key login
only, each exec request run by ``/bin/sh -c`` with the server's environment, its exit status returned.

    python ssh_server.py HOST PORT HOST_KEY AUTHORIZED_KEYS

Started by the tests inside a mount namespace of its own (``unshare -m``), so the commands it runs see one
broker's disks at the shared path."""

from __future__ import annotations

import asyncio
import sys

import asyncssh


async def handle(process: asyncssh.SSHServerProcess[bytes]) -> None:
    command = process.command or "true"
    child = await asyncio.create_subprocess_shell(
        command, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await child.communicate()
    process.stdout.write(out)
    process.stderr.write(err)
    process.exit(child.returncode if child.returncode is not None and child.returncode >= 0 else 255)


async def main(host: str, port: int, host_key: str, authorized_keys: str) -> None:
    await asyncssh.create_server(
        asyncssh.SSHServer,
        host,
        port,
        server_host_keys=[host_key],
        authorized_client_keys=authorized_keys,
        process_factory=handle,
        encoding=None,
    )
    print(f"listening on {host}:{port}", flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]))
