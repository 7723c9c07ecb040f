"""Run sslyze's command line with every TCP connection it opens asked for first (issue 24).

Executed by the interpreter of sslyze's own virtual environment (tools/sslyze/.venv), never
imported by netsurvey: standard library only. Usage::

    python sslyze_gate.py REQUEST_FD GRANT_FD ADDRESS PORT -- SSLYZE_ARGS...

Before each ``socket.connect``/``connect_ex`` (sslyze opens every connection with
``socket.create_connection`` in connection_helpers/tls_connection.py, retries included) one
line ``connect ADDRESS PORT`` goes to REQUEST_FD and the connection waits for one line on
GRANT_FD: ``ok`` (the parent took a token of the run's rate limiter for ADDRESS) or anything
else (refused: the connect raises PermissionError, which sslyze reports as a connection
error). A connection to anything but ADDRESS:PORT is refused here without asking, and name
resolution is refused for anything but an address literal (sslyze is given the address, so
it never resolves; this keeps a DNS query from leaving unpaced). sslyze runs several
threads: one lock makes request and grant one exchange at a time, so grants are handed out
in the order the parent paces them.
"""
import ipaddress
import os
import runpy
import socket
import sys
import threading


def _main() -> None:
    # this file's folder holds netsurvey's sslyze.py: sslyze must be the venv's package
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
    req_fd, grant_fd, address, port = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
    if sys.argv[5] != "--":
        raise SystemExit("sslyze_gate: expected -- before sslyze's arguments")
    allowed = ipaddress.ip_address(address)
    req = os.fdopen(req_fd, "w", buffering=1)
    grant = os.fdopen(grant_fd, "r")
    lock = threading.Lock()

    def ask(addr) -> None:
        try:
            host, p = addr[0], int(addr[1])
            ok = ipaddress.ip_address(host.split("%")[0]) == allowed and p == port
        except (TypeError, ValueError, IndexError):
            ok = False
        if not ok:
            raise PermissionError(f"sslyze_gate: connection to {addr!r} is not the target {address} port {port}")
        with lock:
            req.write(f"connect {host} {p}\n")
            answer = grant.readline().strip()
        if answer != "ok":
            raise PermissionError(f"sslyze_gate: connection to {address} port {port} not granted ({answer or 'EOF'})")

    plain_connect, plain_connect_ex = socket.socket.connect, socket.socket.connect_ex

    def connect(self, addr):
        if self.family in (socket.AF_INET, socket.AF_INET6):
            ask(addr)
        return plain_connect(self, addr)

    def connect_ex(self, addr):
        if self.family in (socket.AF_INET, socket.AF_INET6):
            ask(addr)
        return plain_connect_ex(self, addr)

    plain_getaddrinfo = socket.getaddrinfo

    def getaddrinfo(host, *args, **kw):
        try:
            ipaddress.ip_address(str(host).split("%")[0])
        except ValueError:
            raise socket.gaierror(socket.EAI_NONAME, f"sslyze_gate: no name resolution ({host!r})") from None
        return plain_getaddrinfo(host, *args, **kw)

    socket.socket.connect, socket.socket.connect_ex = connect, connect_ex  # type: ignore[method-assign]  # the gate, deliberately
    socket.getaddrinfo = getaddrinfo
    sys.argv = ["sslyze", *sys.argv[6:]]
    runpy.run_module("sslyze", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    _main()
