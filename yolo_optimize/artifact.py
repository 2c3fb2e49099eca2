"""Artifact folders and their manifests: written atomically, verified by sha256."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import platform
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from yolo_optimize.errors import UserError
from yolo_optimize.files import file_sha256

SCHEMA_VERSION = 1
MANIFEST = "manifest.json"
STORE = ".store"  # every node's folders, by cache key; the artifact folders are views of them
KEY_CHARS = 16
STAGING, TRASH = ".tmp-", ".old-"
HOST_ID_CHARS = 12


@dataclass
class Manifest:
    """Everything needed to trust, reproduce and run one built node."""

    node: str
    stage: str
    model_id: str
    target: str | None  # None for intermediate nodes (.cache)
    precision: str | None
    entry: str | None  # the deployable file, relative to the artifact dir
    cache_key: str
    parents: dict[str, str]  # parent node -> its cache key
    params: dict[str, Any]
    tool_versions: dict[str, str]
    metadata: dict[str, Any]  # also embedded in the artifact itself
    files: dict[str, dict[str, Any]] = field(default_factory=dict)  # relpath -> {sha256, bytes}
    build_seconds: float = 0.0
    parity: dict[str, Any] | None = None
    info: dict[str, Any] = field(default_factory=dict)  # stage-specific facts (e.g. TensorRT profile)
    schema_version: int = SCHEMA_VERSION

    def write(self, folder: Path) -> None:
        self.files = hash_files(folder)
        (folder / MANIFEST).write_text(json.dumps(asdict(self), indent=2, sort_keys=True) + "\n")

    @classmethod
    def read(cls, folder: Path) -> Manifest:
        data = json.loads((folder / MANIFEST).read_text())
        if data.get("schema_version") != SCHEMA_VERSION:
            raise ValueError(f"manifest schema {data.get('schema_version')} != {SCHEMA_VERSION}")
        return cls(**data)


def hash_files(folder: Path) -> dict[str, dict[str, Any]]:
    """Every file's sha256 and size, and its stamp (inode and modification time, which a rename keeps): a file whose
    stamp is unchanged has not been written since it was hashed."""
    files = sorted(p for p in folder.rglob("*") if p.is_file() and p.name != MANIFEST)
    return {p.relative_to(folder).as_posix(): {"sha256": file_sha256(p), "bytes": p.stat().st_size,
                                               "stamp": _stamp(p)} for p in files}


def _stamp(path: Path) -> list[int]:
    facts = path.stat()
    return [facts.st_ino, facts.st_mtime_ns]


def verify_files(folder: Path, manifest: Manifest, *, full: bool = True) -> str | None:
    """None when every listed file is present with its recorded sha256; else what is wrong. Unless ``full``, a file
    whose size and stamp are the ones recorded is trusted without reading it (a cached build's check: any write
    changes the stamp, and a copy has another inode, so those are hashed again)."""
    for relpath, expected in manifest.files.items():
        path = folder / relpath
        if not path.is_file():
            return f"missing file {relpath}"
        if (size := path.stat().st_size) != expected["bytes"]:
            return f"size mismatch for {relpath} ({size} bytes, {expected['bytes']} recorded)"
        unchanged = not full and expected.get("stamp") == _stamp(path)
        if not unchanged and file_sha256(path) != expected["sha256"]:
            return f"sha256 mismatch for {relpath}"
    return None


def read_valid(folder: Path, cache_key: str | None = None, *, full: bool = True) -> Manifest | None:
    """The folder's manifest if it is readable, matches ``cache_key`` (when given) and its files verify (``full``:
    every byte hashed; else by stamp where unchanged, ``verify_files``)."""
    try:
        manifest = Manifest.read(folder)
    except (OSError, ValueError, TypeError):
        return None
    if cache_key is not None and manifest.cache_key != cache_key:
        return None
    return manifest if verify_files(folder, manifest, full=full) is None else None


def store_folder(model_dir: Path, node: str, cache_key: str) -> Path:
    """Where the node built with ``cache_key`` lives: content-keyed, so builds with other inputs never collide."""
    return model_dir / STORE / node / cache_key[:KEY_CHARS]


def host_id() -> str:
    """Which host (one boot of a computer, one pid namespace) a pid belongs to, for folders in a store several
    machines share (NFS): the kernel's boot id, which changes at every boot and differs between computers, with this
    process's pid namespace, which differs between containers on one computer. Only this host's pids can be judged
    here."""
    boot = Path("/proc/sys/kernel/random/boot_id")
    namespace = Path("/proc/self/ns/pid")
    facts = boot.read_text().strip() if boot.exists() else platform.node()
    facts += os.readlink(namespace) if namespace.exists() else ""
    return hashlib.sha256(facts.encode()).hexdigest()[:HOST_ID_CHARS]


def _private_name(prefix: str, final: Path) -> Path:
    """``<prefix><name>-<host>-<pid>-<random>`` beside ``final``: whose it is, for ``sweep_leftovers``."""
    return final.parent / f"{prefix}{final.name}-{host_id()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"


def staging_dir(final: Path) -> Path:
    """A fresh private folder beside ``final``; only a finished build is renamed into place."""
    path = _private_name(STAGING, final)
    path.mkdir(parents=True)
    return path


def publish(staging: Path, final: Path) -> None:
    """Replace ``final`` by ``staging`` so that readers see the old or the new artifact, never a mix."""
    if final.exists():
        trash = _private_name(TRASH, final)
        os.replace(final, trash)
        os.replace(staging, final)
        shutil.rmtree(trash, ignore_errors=True)
    else:
        os.replace(staging, final)


def publish_if_absent(staging: Path, final: Path) -> bool:
    """Rename ``staging`` to ``final`` unless another builder published ``final`` first (False): on a store shared by
    machines there is no lock they all see, and rename(2) refuses to replace a folder that has files."""
    final.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.rename(staging, final)
    except OSError as err:
        if err.errno not in (errno.ENOTEMPTY, errno.EEXIST):
            raise
        return False
    return True


@contextlib.contextmanager
def written_whole(out: Path, last: str = "") -> Iterator[Path]:
    """A private folder to write a set of output files into (a report's): once the block ends, they are moved into
    ``out``, ``last`` after the others (``out`` itself is renamed into place when it did not exist); if the block
    raises (a full disk, Ctrl-C), the folder is removed and ``out`` is left as it was. The folder is made inside
    ``out`` when it exists (its parent may not be ours to write), else beside it; what a killed run left there is
    swept by the next run to ``out``."""
    out = out.absolute()
    inside = out / STAGING_NAME
    sweep_staging(inside)
    sweep_staging(out)
    staging = staging_dir(inside if out.is_dir() else out)
    try:
        yield staging
        with _held(out.parent):  # another run's files never mix with these: one run moves in at a time
            if not out.exists():
                os.rename(staging, out)
                return
            for entry in sorted(staging.iterdir(), key=lambda entry: entry.name == last):
                if entry.is_dir():
                    publish(entry, out / entry.name)
                else:
                    os.replace(entry, out / entry.name)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


@contextlib.contextmanager
def _held(folder: Path) -> Iterator[None]:
    """An exclusive lock on ``folder`` itself (flock on its descriptor: no lock file left behind), held while a run
    moves its files in, so that two runs writing the same output never interleave their files. Released when the
    process dies, so a killed run never blocks the next."""
    descriptor = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        yield
    finally:
        os.close(descriptor)


STAGING_NAME = "written"  # the name a staging folder inside an existing output folder is made for


@contextlib.contextmanager
def scratch_folder(prefix: str) -> Iterator[Path]:
    """A temporary folder (``<prefix><host>-<pid>-*`` in the system's temporary directory), removed when the block
    ends; those a killed run of this machine left (its process gone) are removed first, for they can hold every
    evaluation image preprocessed."""
    root = Path(tempfile.gettempdir())
    for stale in root.glob(f"{prefix}*"):
        if stale.is_dir() and _owner_gone(stale.name):
            shutil.rmtree(stale, ignore_errors=True)
    with tempfile.TemporaryDirectory(prefix=f"{prefix}{host_id()}-{os.getpid()}-") as work:
        yield Path(work)


def sweep_staging(final: Path) -> None:
    """Remove this machine's staging and replaced folders of ``final`` (beside it) whose process is gone."""
    for path in [*final.parent.glob(f"{STAGING}{final.name}-*"), *final.parent.glob(f"{TRASH}{final.name}-*")]:
        if path.is_dir() and _owner_gone(path.name):
            shutil.rmtree(path, ignore_errors=True)


def show(stored: Path, view: Path, cache_key: str, *, full: bool = False, replace: bool = False) -> str | None:
    """Make ``view`` (the folder users read and ship) a copy of ``stored``, atomically, unless it already shows
    ``cache_key`` and its files verify (by stamp, or every byte with ``full``) and ``replace`` is not asked.

    Returns what was wrong with a view that had to be put right (a file of this key edited, truncated or deleted
    since it was published; another node's files in it), else None. The view is a copy-on-write clone where the
    file system has them, else a plain copy, never a hard link: a tool that edits a shipped file in place must not
    edit the cache behind it (docs/building.md, "Published folders").
    """
    shown, wanted = _shown(view), Manifest.read(stored)
    damage = f"{MANIFEST} missing or unreadable" if shown is None and view.is_dir() else None
    if shown is not None and shown.node != wanted.node:
        damage = f"it held {shown.node}'s files (a copy of another artifact's folder)"
    if shown is not None and shown.cache_key == cache_key:
        damage = verify_files(view, shown, full=full) or (None if replace else _edited(shown, wanted))
        if damage is None and not replace:
            return None
    staging = staging_dir(view)
    try:
        for source in sorted(stored.rglob("*")):
            target = staging / source.relative_to(stored)
            if source.is_dir():
                target.mkdir()
            elif source.name != MANIFEST:
                clone_or_copy(source, target)
        _restamp(wanted, staging)
    except BaseException:  # a full disk, Ctrl-C: the view stays as it was
        shutil.rmtree(staging, ignore_errors=True)
        raise
    publish(staging, view)
    return damage


def _edited(shown: Manifest, stored: Manifest) -> str | None:
    """What differs between a published manifest and its store entry's, the files' stamps aside (a copy's own): a
    manifest edited after publishing (its parity, its metadata) no longer vouches for the files beside it."""
    def said(manifest: Manifest) -> dict[str, Any]:
        facts = asdict(manifest)
        files = facts["files"].items()
        facts["files"] = {path: {k: v for k, v in entry.items() if k != "stamp"} for path, entry in files}
        return facts

    published, recorded = said(shown), said(stored)
    changed = sorted(key for key in recorded if published.get(key) != recorded[key])
    return f"{MANIFEST} edited since it was published ({', '.join(changed)})" if changed else None


def _shown(view: Path) -> Manifest | None:
    try:
        return Manifest.read(view)
    except (OSError, ValueError, TypeError):
        return None


def _restamp(manifest: Manifest, folder: Path) -> None:
    """``manifest`` written into ``folder`` with the stamps of ``folder``'s own copies (their hashes are the stored
    ones: copied from a verified entry), so a cached build checks the view by stamp without hashing it."""
    for relpath, facts in manifest.files.items():
        facts["stamp"] = _stamp(folder / relpath)
    (folder / MANIFEST).write_text(json.dumps(asdict(manifest), indent=2, sort_keys=True) + "\n")


FICLONE = 0x40049409  # linux/fs.h: the target shares the source's blocks until either is written (btrfs, XFS)


def clone_or_copy(source: Path, target: Path) -> None:
    """A copy of ``source`` that costs no space where the file system clones files copy-on-write, else a copy."""
    try:
        with open(source, "rb") as reader, open(target, "wb") as writer:
            fcntl.ioctl(writer.fileno(), FICLONE, reader.fileno())
    except OSError:  # no reflinks here (ext4, overlayfs, tmpfs) or across file systems
        shutil.copyfile(source, target)
    shutil.copystat(source, target)


def sweep_leftovers(model_dir: Path) -> list[Path]:
    """Remove this machine's staging and replaced folders whose process is gone (a killed or interrupted build);
    another machine's are its own to judge (``host_id``), however old."""
    removed = []
    for path in [*model_dir.rglob(f"{STAGING}*"), *model_dir.rglob(f"{TRASH}*")]:
        if path.is_dir() and _owner_gone(path.name):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


def _owner_gone(name: str) -> bool:
    """Staging and trash names end in ``-<host>-<pid>-<random>``: made on this machine by a process that has ended?

    A killed worker whose parent died stays a zombie until some init reaps it, and in
    containers nobody may: ``kill(pid, 0)`` succeeds on zombies, so /proc's state decides.
    """
    host, pid_text = name.rsplit("-", 3)[-3:-1] if name.count("-") >= 3 else ("", "")
    if host != host_id() or not pid_text.isdigit():
        return False
    pid = int(pid_text)
    if Path("/proc/self/stat").exists():
        try:
            return process_state(pid) in ("Z", "X")
        except (OSError, IndexError):
            return True
    try:  # no /proc (macOS): signal 0 only says whether the pid exists
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def process_state(pid: int) -> str:
    """The one-letter state in /proc/<pid>/stat (R, S, Z for a zombie...); after the name, which may hold ')'."""
    return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]


def check_writable(out: Path) -> None:
    """Probe the nearest existing folder of ``out`` (the model's own folder when it exists) without leaving anything."""
    existing = out.absolute()
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        raise UserError(f"--out {out}: {existing} is not a directory")
    try:
        handle, probe = tempfile.mkstemp(dir=existing, prefix=".yolo-optimize-probe-")
        os.close(handle)
        os.unlink(probe)
    except OSError as err:
        raise UserError(f"--out {out} is not writable: {err.strerror or err}") from None
