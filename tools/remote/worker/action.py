"""Runs one REAPI Action on this machine: stage inputs, run the command isolated, upload outputs.

CAS traffic goes through BuildGrid's client (buildgrid.server.client.cas: Downloader, Uploader;
batch sizes from the server's capabilities). What it lacks is kept here: a worker-local file
cache, because the ~21k torch files of every torch test are otherwise fetched again for each
action (tools/remote/README.md, "The rig's worker", has the measurement). Inputs are hard links
into that cache, which is safe only because sandbox.py never lets an action write them.
"""

import os
import pathlib
import shutil
import threading
import time
import uuid
from dataclasses import dataclass, field

from buildgrid._protos.build.bazel.remote.execution.v2 import remote_execution_pb2 as re_pb2
from buildgrid._protos.google.rpc import code_pb2, status_pb2
from buildgrid.server.client.cas import Downloader, Uploader
from google.protobuf.timestamp_pb2 import Timestamp

from tools.remote.worker.sandbox import Sandbox


def _now() -> Timestamp:
    stamp = Timestamp()
    stamp.GetCurrentTime()
    return stamp


class FileCache:
    """Content-addressed files this worker has fetched before; inputs are hard links to them."""

    def __init__(self, root: pathlib.Path):
        self._root = root
        root.mkdir(parents=True, exist_ok=True)

    def _path(self, digest: re_pb2.Digest, executable: bool) -> pathlib.Path:
        return self._root / f"{digest.hash}-{digest.size_bytes}{'-x' if executable else ''}"

    def stage(
        self, downloader: Downloader, files: list[tuple[pathlib.Path, re_pb2.Digest, bool]]
    ) -> int:
        """Places every (path, digest, executable); returns how many blobs were fetched."""
        needed = {}
        for _, digest, executable in files:
            path = self._path(digest, executable)
            if path not in needed and not path.exists():
                needed[path] = path.with_name(f"{path.name}.{uuid.uuid4().hex}.tmp")
                downloader.download_file(digest, str(needed[path]), is_executable=executable)
        downloader.flush()
        for path, tmp in needed.items():
            tmp.chmod(0o555 if os.access(tmp, os.X_OK) else 0o444)
            tmp.replace(path)  # atomic: a concurrent stage of the same blob is harmless
        for dest, digest, executable in files:
            source = self._path(digest, executable)
            try:
                os.link(source, dest)
            except OSError:  # too many links, or another file system
                shutil.copy2(source, dest)
        return len(needed)


@dataclass
class Outcome:
    result: re_pb2.ActionResult
    status: status_pb2.Status
    summary: dict = field(default_factory=dict)


class Execution:
    """One action in its own directory under `work_root`; cancel() ends its processes."""

    def __init__(
        self,
        channel,
        instance: str,
        cache: FileCache,
        work_root: pathlib.Path,
        worker: str,
        sandbox_args: list[str] = (),
    ):
        self._downloader = Downloader(channel, instance)
        self._uploader = Uploader(channel, instance)
        self._cache = cache
        self._dir = work_root / uuid.uuid4().hex
        self._worker = worker
        self._sandbox_args = sandbox_args
        self._sandbox: Sandbox | None = None
        self._cancelled = threading.Event()
        self.command = re_pb2.Command()  # the action's, once fetched (empty if that failed)

    def cancel(self) -> None:
        self._cancelled.set()
        if self._sandbox:
            self._sandbox.cancel()

    def run(self, action: re_pb2.Action) -> Outcome:
        try:
            return self._run(action)
        finally:
            shutil.rmtree(self._dir, ignore_errors=True)

    def _run(self, action: re_pb2.Action) -> Outcome:
        meta = re_pb2.ExecutedActionMetadata(worker=self._worker)
        meta.input_fetch_start_timestamp.CopyFrom(_now())
        staging = time.monotonic()
        command = self.command = self._downloader.get_message(
            action.command_digest, re_pb2.Command()
        )
        inputs = self._dir / "inputs"
        files, fetched = self._stage(action.input_root_digest, inputs)
        outputs = list(command.output_paths) or [*command.output_files, *command.output_directories]
        for output in outputs:  # REAPI: the worker creates the outputs' parent directories
            (inputs / command.working_directory / output).parent.mkdir(parents=True, exist_ok=True)
        stage_s = time.monotonic() - staging
        meta.input_fetch_completed_timestamp.CopyFrom(_now())

        timeout = action.timeout.seconds + action.timeout.nanos / 1e9 or None
        status = status_pb2.Status(code=code_pb2.OK)
        stdout, stderr = self._dir / "stdout", self._dir / "stderr"
        with Sandbox(
            inputs, self._dir / "layer", self._dir / "root", self._sandbox_args
        ) as sandbox:
            cwd = sandbox.root / command.working_directory
            meta.execution_start_timestamp.CopyFrom(_now())
            started = time.monotonic()
            with stdout.open("wb") as out, stderr.open("wb") as err:
                env = {v.name: v.value for v in command.environment_variables}
                sandbox.start(list(command.arguments), cwd, env, out, err)
                self._sandbox = sandbox
                if self._cancelled.is_set():
                    sandbox.cancel()
                exit_code, timed_out = sandbox.wait(timeout)
            run_s = time.monotonic() - started
            if timed_out:
                status = status_pb2.Status(
                    code=code_pb2.DEADLINE_EXCEEDED, message=f"action timed out after {timeout} s"
                )
            meta.execution_completed_timestamp.CopyFrom(_now())

            meta.output_upload_start_timestamp.CopyFrom(_now())
            result = re_pb2.ActionResult(exit_code=exit_code)
            self._upload_outputs(cwd, command, outputs, result)
        result.stdout_digest.CopyFrom(self._uploader.upload_file(str(stdout)))
        result.stderr_digest.CopyFrom(self._uploader.upload_file(str(stderr)))
        self._uploader.flush()
        meta.output_upload_completed_timestamp.CopyFrom(_now())
        result.execution_metadata.CopyFrom(meta)
        summary = {
            "input_root": f"{action.input_root_digest.hash}/{action.input_root_digest.size_bytes}",
            "inputs": files,
            "fetched": fetched,
            "stage_s": stage_s,
            "exit": exit_code,
            "run_s": run_s,
        }
        if status.code != code_pb2.OK:
            summary["status"] = status.message
        return Outcome(result=result, status=status, summary=summary)

    def _stage(self, root_digest: re_pb2.Digest, root: pathlib.Path) -> tuple[int, int]:
        """Lays out the input tree under `root`; returns (files, blobs fetched)."""
        files: list[tuple[pathlib.Path, re_pb2.Digest, bool]] = []
        level = [(root, root_digest)]
        while level:  # one batch of Directory messages per tree level
            unique = list({d.hash: d for _, d in level}.values())
            directories = {d.hash: re_pb2.Directory() for d in unique}  # filled in place
            self._downloader.get_messages(unique, [directories[d.hash] for d in unique])
            following = []
            for path, digest in level:
                directory = directories[digest.hash]
                path.mkdir(parents=True, exist_ok=True)
                files += [(path / f.name, f.digest, f.is_executable) for f in directory.files]
                following += [(path / d.name, d.digest) for d in directory.directories]
                for link in directory.symlinks:
                    os.symlink(link.target, path / link.name)
            level = following
        return len(files), self._cache.stage(self._downloader, files)

    def _upload_outputs(
        self,
        cwd: pathlib.Path,
        command: re_pb2.Command,
        outputs: list[str],
        result: re_pb2.ActionResult,
    ):
        declared_dirs = set(command.output_directories)
        for name in outputs:
            path = cwd / name
            if path.is_dir() and (name in declared_dirs or command.output_paths):
                digest = self._uploader.upload_tree(str(path))
                result.output_directories.add(path=name, tree_digest=digest)
            elif path.is_file():
                digest = self._uploader.upload_file(str(path))
                result.output_files.add(
                    path=name, digest=digest, is_executable=os.access(path, os.X_OK)
                )
