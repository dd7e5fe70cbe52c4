"""Runs one REAPI Action on this machine: stage inputs, run the command, upload its outputs.

Inputs are hard-linked from a worker-local content cache (read-only files keyed by digest and
executable bit), so a second action with the same ~21k torch files stages them without
fetching. No sandbox beyond a fresh directory per action: the rig proves routing and caching,
production pools isolate actions with their service's own executor.
"""

import os
import pathlib
import shutil
import signal
import subprocess
import threading
import time
import uuid
from dataclasses import dataclass, field

from buildgrid._protos.build.bazel.remote.execution.v2 import remote_execution_pb2 as re_pb2
from buildgrid._protos.google.rpc import code_pb2, status_pb2
from google.protobuf.timestamp_pb2 import Timestamp

from tools.remote.worker.cas import Cas, batches, digest_of, file_digest


def _now() -> Timestamp:
    stamp = Timestamp()
    stamp.GetCurrentTime()
    return stamp


class FileCache:
    """Content-addressed files this worker has fetched before; inputs are hard links to them."""

    def __init__(self, root: pathlib.Path):
        self._root = root
        root.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()

    def _path(self, digest: re_pb2.Digest, executable: bool) -> pathlib.Path:
        return self._root / f"{digest.hash}-{digest.size_bytes}{'-x' if executable else ''}"

    def stage(self, cas: Cas, files: list[tuple[pathlib.Path, re_pb2.Digest, bool]]) -> int:
        """Places every (path, digest, executable); returns how many blobs were fetched."""
        needed = {}
        for _, digest, executable in files:
            path = self._path(digest, executable)
            if not path.exists():
                needed[path] = (digest, executable)
        small = [(p, d, x) for p, (d, x) in needed.items() if d.size_bytes <= 512 * 1024]
        by_hash: dict[str, list[tuple[pathlib.Path, bool]]] = {}
        for path, digest, executable in small:
            by_hash.setdefault(digest.hash, []).append((path, executable))
        for batch in batches({d.hash: d for _, d, _ in small}.values()):
            blobs = cas.read(batch)
            for h, data in blobs.items():
                for path, executable in by_hash[h]:
                    self._store(path, executable, lambda tmp, data=data: tmp.write_bytes(data))
        for path, (digest, executable) in needed.items():
            if digest.size_bytes > 512 * 1024:
                self._store(path, executable, lambda tmp, d=digest: cas.read_to_file(d, tmp))
        for dest, digest, executable in files:
            source = self._path(digest, executable)
            try:
                os.link(source, dest)
            except OSError:  # too many links, or another file system
                shutil.copy2(source, dest)
        return len(needed)

    def _store(self, path: pathlib.Path, executable: bool, write) -> None:
        tmp = path.with_name(f"{path.name}.{uuid.uuid4().hex}.tmp")
        write(tmp)
        tmp.chmod(0o555 if executable else 0o444)  # shared by hard links: never writable
        tmp.replace(path)


@dataclass
class Outcome:
    result: re_pb2.ActionResult
    status: status_pb2.Status
    summary: dict = field(default_factory=dict)


class Execution:
    """One action in its own directory under `work_root`; cancel() kills its process group."""

    def __init__(self, cas: Cas, cache: FileCache, work_root: pathlib.Path, worker: str):
        self._cas = cas
        self._cache = cache
        self._dir = work_root / uuid.uuid4().hex
        self._worker = worker
        self._process: subprocess.Popen | None = None
        self._cancelled = threading.Event()

    def cancel(self) -> None:
        self._cancelled.set()
        if self._process and self._process.poll() is None:
            os.killpg(self._process.pid, signal.SIGKILL)

    def run(self, action: re_pb2.Action) -> Outcome:
        try:
            return self._run(action)
        finally:
            shutil.rmtree(self._dir, ignore_errors=True)

    def _run(self, action: re_pb2.Action) -> Outcome:
        meta = re_pb2.ExecutedActionMetadata(worker=self._worker)
        meta.input_fetch_start_timestamp.CopyFrom(_now())
        command = self._cas.read_message(action.command_digest, re_pb2.Command())
        root = self._dir / "root"
        inputs, fetched = self._stage(action.input_root_digest, root)
        cwd = root / command.working_directory
        outputs = list(command.output_paths) or [
            *command.output_files,
            *command.output_directories,
        ]
        for output in outputs:  # REAPI: the worker creates the outputs' parent directories
            (cwd / output).parent.mkdir(parents=True, exist_ok=True)
        meta.input_fetch_completed_timestamp.CopyFrom(_now())

        env = {v.name: v.value for v in command.environment_variables}
        stdout, stderr = self._dir / "stdout", self._dir / "stderr"
        timeout = action.timeout.seconds + action.timeout.nanos / 1e9 or None
        status = status_pb2.Status(code=code_pb2.OK)
        meta.execution_start_timestamp.CopyFrom(_now())
        started = time.monotonic()
        with stdout.open("wb") as out, stderr.open("wb") as err:
            self._process = subprocess.Popen(
                list(command.arguments),
                cwd=cwd,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                start_new_session=True,  # one process group to kill on timeout or cancel
            )
            if self._cancelled.is_set():
                self.cancel()
            try:
                exit_code = self._process.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self._process.pid, signal.SIGKILL)
                exit_code = self._process.wait()
                status = status_pb2.Status(
                    code=code_pb2.DEADLINE_EXCEEDED, message=f"action timed out after {timeout} s"
                )
        run_s = time.monotonic() - started
        meta.execution_completed_timestamp.CopyFrom(_now())

        meta.output_upload_start_timestamp.CopyFrom(_now())
        result = re_pb2.ActionResult(exit_code=exit_code)
        blobs = self._collect(cwd, command, result)
        for stream, field_name in ((stdout, "stdout_digest"), (stderr, "stderr_digest")):
            digest = file_digest(stream)
            getattr(result, field_name).CopyFrom(digest)
            blobs[digest.hash] = (digest, stream)
        self._cas.upload(blobs)
        meta.output_upload_completed_timestamp.CopyFrom(_now())
        result.execution_metadata.CopyFrom(meta)
        summary = {"inputs": inputs, "fetched": fetched, "exit": exit_code, "run_s": run_s}
        if status.code != code_pb2.OK:
            summary["status"] = status.message
        return Outcome(result=result, status=status, summary=summary)

    def _stage(self, root_digest: re_pb2.Digest, root: pathlib.Path) -> tuple[int, int]:
        directories = self._cas.read_tree(root_digest)
        files: list[tuple[pathlib.Path, re_pb2.Digest, bool]] = []
        pending = [(root, root_digest.hash)]
        while pending:
            path, digest_hash = pending.pop()
            path.mkdir(parents=True, exist_ok=True)
            directory = directories[digest_hash]
            files += [(path / f.name, f.digest, f.is_executable) for f in directory.files]
            pending += [(path / d.name, d.digest.hash) for d in directory.directories]
            for link in directory.symlinks:
                os.symlink(link.target, path / link.name)
        fetched = self._cache.stage(self._cas, files)
        return len(files), fetched

    def _collect(self, cwd: pathlib.Path, command: re_pb2.Command, result: re_pb2.ActionResult):
        """Fills the result's outputs; returns the blobs to upload by hash."""
        blobs: dict[str, tuple[re_pb2.Digest, bytes | pathlib.Path]] = {}
        declared_dirs = set(command.output_directories)
        paths = list(command.output_paths) or [*command.output_files, *command.output_directories]
        for name in paths:
            path = cwd / name
            if path.is_dir() and (name in declared_dirs or command.output_paths):
                tree = re_pb2.Tree(root=self._directory(path, blobs, children := []))
                tree.children.extend(children)
                data = tree.SerializeToString(deterministic=True)
                digest = digest_of(data)
                blobs[digest.hash] = (digest, data)
                result.output_directories.add(path=name, tree_digest=digest)
            elif path.is_file():
                digest = file_digest(path)
                blobs[digest.hash] = (digest, path)
                result.output_files.add(
                    path=name, digest=digest, is_executable=os.access(path, os.X_OK)
                )
        return blobs

    def _directory(self, path: pathlib.Path, blobs, children: list) -> re_pb2.Directory:
        directory = re_pb2.Directory()
        for entry in sorted(path.iterdir(), key=lambda p: p.name):
            if entry.is_dir():
                child = self._directory(entry, blobs, children)
                children.append(child)
                digest = digest_of(child.SerializeToString(deterministic=True))
                directory.directories.add(name=entry.name, digest=digest)
            elif entry.is_file():
                digest = file_digest(entry)
                blobs[digest.hash] = (digest, entry)
                directory.files.add(
                    name=entry.name, digest=digest, is_executable=os.access(entry, os.X_OK)
                )
        return directory
