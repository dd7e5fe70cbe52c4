"""The runner's ends of the test processes' channels (the test processes' end: process/witness.py).

`Witness`: a Unix datagram socket bound in the runner's private temporary directory before the
test process starts, for the witness's events of every process of the test (ranks connect to
its address). `Stream`: one end of a socket pair whose other end one process inherits (the
test process's ledger, the inventory's record): no path names it. A thread reads each into
memory as data arrives: once sent, an event or a line is the runner's, and the test process
cannot take it back, rewrite it or keep it from arriving by how it exits.
"""

import contextlib
import json
import os
import socket
import threading


class _Reader:
    """A thread handing what `sock` receives to `keep` until `done()` (then what is queued) or,
    for a stream, until every writer closed it. Call `done()` once the writers have ended: a
    process that outlived them cannot hold the runner up, nor add to a verdict made."""

    def __init__(self, sock: socket.socket, keep, stream: bool):
        self._socket, self._stop = sock, threading.Event()
        sock.settimeout(0.1)  # the reader looks at its stop flag this often
        self._thread = threading.Thread(target=self._read, args=(keep, stream), daemon=True)
        self._thread.start()

    def _read(self, keep, stream: bool) -> None:
        while True:
            try:
                data = self._socket.recv(1 << 16)
            except TimeoutError:
                if self._stop.is_set():
                    return  # nothing queued and no more wanted
                continue
            except OSError:
                return
            if stream and not data:
                return
            keep(data)

    def done(self) -> None:
        if not self._stop.is_set():
            self._stop.set()
            self._thread.join()
            self._socket.close()


class Witness(_Reader):
    def __init__(self, directory: str):
        self.address = os.path.join(directory, "witness.sock")
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        sock.bind(self.address)
        self._events: list[dict] = []
        super().__init__(sock, self._keep, stream=False)

    def _keep(self, data: bytes) -> None:
        with contextlib.suppress(ValueError):  # not JSON: no event of the schema
            self._events.append(json.loads(data))

    def events(self) -> list[dict]:
        """Every event received, in order."""
        self.done()
        return list(self._events)


class Stream(_Reader):
    """What one process writes to the descriptor `fd` it inherits (pass_fds), as it arrives."""

    def __init__(self):
        ours, theirs = socket.socketpair()
        self.fd, self._chunks = theirs.detach(), []
        super().__init__(ours, self._chunks.append, stream=True)

    def given(self) -> None:
        """The process has its end (started): the runner's copy of it closes."""
        os.close(self.fd)

    def text(self) -> str:
        """Everything written."""
        self.done()
        return b"".join(self._chunks).decode(errors="replace")
