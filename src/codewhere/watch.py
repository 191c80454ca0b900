"""Keep an index current from file-system events: `codewhere watch` and the long-lived servers.

One thread per root: it sets up the watch (watchfiles, the binding of Rust's `notify`), catches
up once with a whole refresh, then applies what changed as refreshes of those paths alone, each
one transaction. A git checkout, rebase or stash is a burst of writes while git holds its index
lock: the burst is applied once the lock is gone, as one refresh. Paths in built-in folders
(`node_modules`, `.git`, build output) are dropped before any work.
"""

from __future__ import annotations

import logging
import os
import queue
import signal
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from codewhere import gitinfo
from codewhere.api import Index
from codewhere.config import Settings
from codewhere.errors import CodewhereError, IndexBusyError
from codewhere.indexer import IndexReport, Progress, Step
from codewhere.languages import SKIPPED_DIRS
from codewhere.tier_filler import TierFiller

log = logging.getLogger(__name__)

QUIET_MS = 50  # changes are applied once the tree has been quiet this long...
MOST_MS = 1_600  # ...or after this long of continuous changes
WAKE_MS = 100  # with no events, the thread still wakes this often (git's lock, stop requests)
GIT_WAIT_SECONDS = 120.0  # a git operation still holding its lock after this long is not waited for
GIT_LOCK_STALE_SECONDS = 10.0  # a git lock untouched this long is most likely a crashed git's
RETRY_SECONDS = 1.0  # another process holding the index: try the changes again after this

STARTING, CATCHING_UP, WATCHING, REFRESHING, UNAVAILABLE, STOPPED = (
    "starting", "catching up", "watching", "refreshing", "unavailable", "stopped"
)


class _CannotCatchUp(Exception):
    """The first refresh failed for a reason a retry will not mend."""


@dataclass(frozen=True)
class WatchStatus:
    """What a watcher is doing, for a status line and for answers given during a refresh."""

    state: str
    detail: str = ""  # why unavailable; what is being refreshed
    step: Step | None = None  # how far the running refresh is
    applied: int = 0  # refreshes applied since the watch began

    def describe(self) -> str:
        if self.state in (CATCHING_UP, REFRESHING) and self.step is not None and self.step.total:
            return f"{self.state}: {self.step.phase} {self.step.done:,} of {self.step.total:,}"
        return f"{self.state}: {self.detail}" if self.detail else self.state


class Watcher:
    """Watches `root` and keeps its index current, in a thread of its own with an index of its
    own (`open_index`), so readers in other threads go on answering from the last commit."""

    def __init__(self, root: Path, open_index: Callable[[], Index], poll: bool = False,
                 on_report: Callable[[IndexReport], None] | None = None) -> None:
        self.root = Path(os.path.realpath(root))
        self._open_index = open_index
        self._poll = poll
        self._on_report = on_report
        self._stop = threading.Event()
        self._ready = threading.Event()  # caught up once (or given up): waiters may go on
        self._changed = threading.Condition()
        self._status = WatchStatus(STARTING)
        self._thread: threading.Thread | None = None
        self._ignored: set[str] = set()  # the index's own files, when they lie inside the root
        self._progress_listeners: list[Progress] = []
        self._git_dir = gitinfo.git_dir(self.root)
        self._told_stale_lock = False

    # ---- what other threads ask ----------------------------------------------------------

    @property
    def status(self) -> WatchStatus:
        return self._status

    def live(self) -> bool:
        """Caught up and watching: the index is current without a walk of the tree."""
        return self._status.state in (WATCHING, REFRESHING)

    def start(self) -> Watcher:
        self._thread = threading.Thread(target=self._run, name=f"codewhere-watch {self.root.name}", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def wait_ready(self, progress: Progress | None = None, timeout: float | None = None,
                   cancelled: threading.Event | None = None) -> bool:
        """Block until the first catch-up is done (True) or the watch gave up (False), passing
        every step of the catch-up to `progress` in the waiting thread (an MCP call's progress
        must be sent from its own worker thread). `cancelled` being set ends the wait at once."""
        steps: queue.SimpleQueue[Step] = queue.SimpleQueue()
        self._progress_listeners.append(steps.put)
        end = None if timeout is None else time.monotonic() + timeout
        try:
            while True:
                done = self._ready.wait(WAKE_MS / 1000)
                while progress is not None and not steps.empty():
                    progress(steps.get_nowait())
                if done or (end is not None and time.monotonic() >= end) or (cancelled is not None and cancelled.is_set()):
                    break
        finally:
            self._progress_listeners.remove(steps.put)
        return self.live()

    def wait_applied(self, count: int, timeout: float) -> bool:
        """Block until at least `count` refreshes have been applied (tests, benchmarks)."""
        with self._changed:
            return self._changed.wait_for(lambda: self._status.applied >= count, timeout)

    # ---- the thread ----------------------------------------------------------------------

    def _set(self, **changes: object) -> None:
        with self._changed:
            current = self._status.__dict__ | changes
            self._status = WatchStatus(**current)
            self._changed.notify_all()

    def _progress(self, step: Step) -> None:
        self._set(step=step)
        for listener in list(self._progress_listeners):
            listener(step)

    def _run(self) -> None:
        try:
            self._watch()
        except _CannotCatchUp as exc:  # nothing to index, a read-only index: the watch has no work
            self._set(state=UNAVAILABLE, detail=str(exc))
        except Exception as exc:  # the watch is a convenience: its failure must not end the process
            log.exception("the file watcher of %s stopped", self.root)
            self._set(state=UNAVAILABLE, detail=f"{type(exc).__name__}: {exc}")
        finally:
            if self._status.state != UNAVAILABLE:
                self._set(state=STOPPED)
            self._ready.set()

    def _watch(self) -> None:
        try:
            import watchfiles
        except ImportError:
            self._give_up("watchfiles is not installed")
            return
        remote = network_filesystem(self.root)
        if remote and not self._poll:
            self._give_up(f"it is on a network file system ({remote}), where change events do not arrive; "
                          "--poll watches by polling")
            return
        outside = link_leaving(self.root)
        if outside is not None:  # the watcher follows links; the scanner never does
            self._give_up(f"{outside} is a link to a folder outside it, which the watcher would follow")
            return
        events = watchfiles.watch(
            self.root, watch_filter=None, debounce=MOST_MS, step=QUIET_MS, stop_event=self._stop,
            rust_timeout=WAKE_MS, yield_on_timeout=True, raise_interrupt=False,
            force_polling=True if self._poll else None, ignore_permission_denied=True,
        )
        try:
            pending = self._relevant(next(events))  # the watch exists once the first wake returns
        except (OSError, RuntimeError) as exc:  # inotify's watch limit, an unsupported file system
            self._give_up(str(exc))
            return
        except StopIteration:
            return
        index = self._open_index()
        try:
            self._ignored = _own_files(index)
            self._set(state=CATCHING_UP)
            while not self._apply(index, None):  # another process is indexing: try again after it
                if self._stop.is_set():
                    return
            self._set(state=WATCHING)
            self._ready.set()
            git_busy_since: float | None = None
            while True:
                try:
                    changes = next(events)
                except StopIteration:
                    return
                except (OSError, RuntimeError) as exc:  # a name it cannot decode, a lost inotify queue
                    self._give_up(str(exc))
                    return
                pending |= self._relevant(changes)
                if not pending:
                    continue
                if self._git_busy():
                    git_busy_since = git_busy_since or time.monotonic()
                    if time.monotonic() - git_busy_since < GIT_WAIT_SECONDS:
                        continue  # mid-checkout: gather the whole burst, apply it as one
                git_busy_since = None
                if self._apply(index, pending):
                    pending = set()
        finally:
            index.close()

    def _give_up(self, why: str) -> None:
        log.warning("cannot watch %s for changes (%s); each answer checks the files instead", self.root, why)
        self._set(state=UNAVAILABLE, detail=why)

    def _apply(self, index: Index, paths: set[str] | None) -> bool:
        """One refresh: the whole tree (None) or these paths. False when it must be retried."""
        self._set(state=CATCHING_UP if paths is None else REFRESHING, step=None,
                  detail="" if paths is None else f"{len(paths)} changed paths")
        try:
            report = index.refresh(self._progress, wait_seconds=0.0, paths=None if paths is None else sorted(paths))
        except IndexBusyError:
            self._stop.wait(RETRY_SECONDS)  # another process is indexing: its work may cover ours
            self._set(state=WATCHING if self._ready.is_set() else CATCHING_UP, detail="")
            return False
        except CodewhereError as exc:  # a full disk, a read-only index: say it, keep the changes
            if not self._ready.is_set():
                raise _CannotCatchUp(str(exc)) from exc
            log.warning("could not refresh %s: %s", self.root, exc)
            self._stop.wait(RETRY_SECONDS)
            self._set(state=WATCHING if self._ready.is_set() else CATCHING_UP, detail="")
            return False
        if self._on_report is not None:
            self._on_report(report)
        self._set(state=WATCHING, detail="", step=None, applied=self._status.applied + 1)
        return True

    def _relevant(self, changes: Iterable[tuple[object, str]]) -> set[str]:
        """The changed paths, relative to the root, that can matter to the index."""
        kept: set[str] = set()
        prefix = str(self.root) + os.sep
        for _, path in changes:
            if path in self._ignored or not path.startswith(prefix):
                continue
            rel = path[len(prefix):].replace(os.sep, "/")
            parts = rel.split("/")
            if not SKIPPED_DIRS.isdisjoint(parts[:-1]) or (parts[-1] in SKIPPED_DIRS and not os.path.isfile(path)):
                continue  # .git internals, node_modules, build output: nothing there is indexed
            kept.add(rel)
        return kept

    def _git_busy(self) -> bool:
        """Whether git is mid-operation: its index lock exists and was touched lately. A lock
        left by a crashed git stays for good; one older than GIT_LOCK_STALE_SECONDS is said once
        and not waited for (a long checkout then arrives in several refreshes, not one)."""
        if self._git_dir is None:
            return False
        lock = self._git_dir / "index.lock"
        try:
            age = time.time() - lock.stat().st_mtime
        except OSError:
            return False
        if age < GIT_LOCK_STALE_SECONDS:
            return True
        if not self._told_stale_lock:
            self._told_stale_lock = True
            log.warning("%s is %.0f s old, left by a git that did not finish; changes are applied without waiting "
                        "for it (remove it if no git is running)", lock, age)
        return False


def link_leaving(root: Path) -> str | None:
    """The first symbolic link under `root` to a folder outside it (a link to `/` would have
    the watcher set up a watch on every folder of the machine), or None. Built-in folders
    (`.git`, `node_modules`) are not looked into: their links are theirs."""
    root_real = os.path.realpath(root)
    stack = [root_real]
    while stack:
        folder = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            try:
                if entry.is_symlink():
                    target = os.path.realpath(entry.path)
                    inside = target == root_real or target.startswith(root_real.rstrip(os.sep) + os.sep)
                    if os.path.isdir(target) and not inside:
                        return os.path.relpath(entry.path, root_real)
                elif entry.is_dir(follow_symlinks=False) and entry.name not in SKIPPED_DIRS:
                    stack.append(entry.path)
            except OSError:
                continue
    return None


def _own_files(index: Index) -> set[str]:
    """The index file and its companions, when the index lives inside the watched tree: its
    own commits must not look like changes."""
    location = Path(index.store.location)
    if not location.is_absolute():
        return set()
    base = os.path.realpath(location)
    return {base + suffix for suffix in ("", "-wal", "-shm", "-journal", ".lock")}


def describe_report(root: Path, report: IndexReport) -> str:
    """One line per applied change: what it did, how long it took."""
    parts = [f"{n} {what}" for n, what in ((report.files_added, "added"), (report.files_changed, "changed"),
                                          (report.files_removed, "removed")) if n]
    return f"{root.name}: {', '.join(parts) or 'nothing changed'} in {report.seconds:.2f} s"


def watch_forever(roots: list[Path], progress: Progress | None, poll: bool, say: Callable[[str], None]) -> int:
    """`codewhere watch`: catch up, then keep every root current until interrupted. 0 when
    stopped by the user; 2 when no root can be watched (the reason is said)."""
    def teller(root: Path) -> Callable[[IndexReport], None]:
        def tell(report: IndexReport) -> None:
            if report.changed:
                say(describe_report(root, report))
        return tell

    # Ctrl-C and SIGTERM set an event instead of raising wherever the main thread happens to be
    # (inside a lock, a join, rich's console): a stop is then the same short path every time
    interrupted = threading.Event()
    previous = {number: signal.signal(number, lambda *_: interrupted.set()) for number in STOP_SIGNALS}
    watchers = [Watcher(root, partial(Index.open, root), poll=poll, on_report=teller(root)).start() for root in roots]
    fillers = [TierFiller(root, partial(Index.open, root)).start() for root in roots if Settings.load(root).quality]
    try:
        for watcher in watchers:
            if not watcher.wait_ready(progress, cancelled=interrupted) and not interrupted.is_set():
                say(f"cannot watch {watcher.root}: {watcher.status.detail or watcher.status.state}")
        if interrupted.is_set():
            return 0
        live = [w for w in watchers if w.live()]
        if not live:
            say("nothing to watch; try --poll, or raise the inotify limit (fs.inotify.max_user_watches)")
            return 2
        say(f"watching {', '.join(str(w.root) for w in live)}; Ctrl-C stops")
        while any(w.status.state not in (STOPPED, UNAVAILABLE) for w in live):
            if interrupted.wait(0.5):
                return 0
        return 2
    finally:
        for filler in fillers:
            filler.stop(timeout=0)
        for watcher in watchers:
            watcher.stop(timeout=0)  # all told at once
        deadline = time.monotonic() + STOP_SECONDS
        for watcher in watchers:  # a refresh still running is left to die with the process: a killed one loses nothing
            watcher.stop(timeout=max(0.0, deadline - time.monotonic()))
        for number, handler in previous.items():
            signal.signal(number, handler)


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
STOP_SECONDS = 0.5  # what an interrupted `codewhere watch` waits for its watchers before it exits


NETWORK_FILESYSTEMS = frozenset({
    "nfs", "nfs4", "cifs", "smb3", "smbfs", "9p", "afs", "ceph", "glusterfs", "lustre", "fuse.sshfs",
    "fuse.rclone", "fuse.gcsfuse", "fuse.s3fs", "davfs", "fuse.davfs2", "virtiofs",
})


def network_filesystem(path: Path, mounts: Path = Path("/proc/self/mounts")) -> str | None:
    """The type of the network file system `path` lies on (a change on another machine, or
    through the share, raises no event here), or None. Linux only: elsewhere None."""
    try:
        lines = mounts.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    target, best, kind = str(path), "", ""
    for line in lines:
        fields = line.split()
        if len(fields) < 3:
            continue
        point = fields[1].encode().decode("unicode_escape")  # `\040` is a space in a mount point
        if (target == point or target.startswith(point.rstrip("/") + "/")) and len(point) > len(best):
            best, kind = point, fields[2]
    return kind if kind in NETWORK_FILESYSTEMS else None
