"""Drives `agent-exec` on a real pseudo-terminal (its controlling terminal, so `/dev/tty` is
the pty), with stdout on a pipe. Used by `tty.rs`. argv[1] is a JSON plan:
    {"argv": [...], "script": [["expect", "text"], ["send", "text"], ["echo?"], ...]}
"expect" waits (at most 60 s) until the terminal has shown the text; "send" types; "echo?"
records whether the terminal echoes input right now. Prints one JSON object: the exit code,
stdout, the terminal transcript, the echo records, and the terminal's modes after the exit.
"""

import fcntl
import json
import os
import select
import subprocess
import sys
import termios
import time


def main():
    plan = json.loads(sys.argv[1])
    master, slave = os.openpty()

    def controlling_terminal():
        os.setsid()
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    proc = subprocess.Popen(
        plan["argv"],
        stdin=slave,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=controlling_terminal,
    )
    seen = b""
    echo = []

    def pump(deadline):
        nonlocal seen
        r, _, _ = select.select([master], [], [], max(0.0, min(0.2, deadline - time.time())))
        if r:
            try:
                seen += os.read(master, 65536)
            except OSError:
                pass

    for step in plan["script"]:
        if step[0] == "expect":
            deadline = time.time() + 60
            while step[1].encode() not in seen:
                if time.time() > deadline:
                    proc.kill()
                    raise SystemExit(f"never saw {step[1]!r}; the terminal showed {seen!r}")
                pump(deadline)
        elif step[0] == "send":
            os.write(master, step[1].encode())
        elif step[0] == "echo?":
            echo.append(bool(termios.tcgetattr(slave)[3] & termios.ECHO))
    out, err = proc.communicate(timeout=120)
    deadline = time.time() + 0.5
    while time.time() < deadline:
        pump(deadline)
    lflag = termios.tcgetattr(slave)[3]
    print(json.dumps({
        "code": proc.returncode,
        "stdout": out.decode(),
        "stderr": err.decode(),
        "tty": seen.decode(errors="replace"),
        "echo": echo,
        "after": {"echo": bool(lflag & termios.ECHO), "isig": bool(lflag & termios.ISIG)},
    }))


main()
