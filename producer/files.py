"""Which files to translate, where their translations go, and writing them atomically."""

from __future__ import annotations

import errno
import os
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from producer import defaults
from producer.compression import compressing, compression_of, split_name
from producer.documents import DocumentError, output_path

#: What `os.link` fails with where a file system has no hard links.
_NO_HARD_LINKS = frozenset({errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV, errno.ENOSYS})


@dataclass(frozen=True)
class FileTask:
    """One input document and the path of its translation."""

    source: Path
    target: Path


def plan_files(
    inputs: Sequence[Path],
    out: Path | None = None,
    out_is_dir: bool = False,
    hidden: bool = True,
    mirrors: bool = True,
) -> list[FileTask]:
    """The file tasks for ``inputs`` (files and directories).

    - A file goes next to itself as ``NAME.zh.EXT``; with ``out``, into directory ``out``,
      or to the file ``out`` itself when it is the only input and ``out`` is not a directory
      (neither an existing one nor, with ``out_is_dir``, one to be made: ``-o DIR/``).
    - A directory is walked for supported suffixes and mirrored into ``out`` (default: a
      sibling ``DIR.zh``) under the same relative names. Files that look like translations
      (``*.zh.EXT``), with ``mirrors`` a directory ``D.zh`` beside a directory ``D`` (the
      tree of an earlier run on ``D``), and anything inside the output tree are left alone;
      so are, without
      ``hidden``, the files and directories whose names start with ``.`` (never entered:
      writers such as rsync keep files in progress there, which may vanish while walked).
    - Whatever is not a directory is planned as a file, even a FIFO, a device, a symbolic
      link loop or a dangling link: reading it (`producer.inputs.stream_input`) fails for
      that file alone, naming it and what it is, and nothing here opens or follows it.

    Raises DocumentError for a missing input, a target that is one of the inputs, or two
    inputs that would be written to the same target.
    """
    tasks: list[FileTask] = []
    single_file = len(inputs) == 1 and not Path(inputs[0]).is_dir()
    for given in map(Path, inputs):
        if given.is_dir():
            absolute = Path(os.path.abspath(given))  # names "." and ".." too
            if out is None and not absolute.name:
                raise DocumentError(f"{given}: the root directory has no sibling for its output; give -o DIR")
            root = out or absolute.with_name(absolute.name + defaults.OUTPUT_INFIX)
            tasks.extend(
                FileTask(path, root / path.relative_to(given)) for path in _walk(given, root, hidden, mirrors)
            )
        elif os.path.lexists(given):
            if out is None:
                target = output_path(given)
            elif single_file and not out_is_dir and not out.is_dir():
                target = out
            else:
                target = out / output_path(given).name
            tasks.append(FileTask(given, target))
        else:
            raise DocumentError(f"{given}: no such file or directory")
    sources = {_real(task.source) for task in tasks}
    writers: dict[Path, Path] = {}
    for task in tasks:
        target = _real(task.target)
        if target in sources:
            raise DocumentError(f"{task.source}: refusing to overwrite input {task.target}")
        if target in writers:
            raise DocumentError(f"{writers[target]} and {task.source} would both be written to {task.target}")
        writers[target] = task.source
    return tasks


def _real(path: Path) -> Path:
    """``path`` with every symbolic link resolved as far as it goes (a loop or a dangling
    link stays as it is, where ``Path.resolve`` would raise on a loop)."""
    return Path(os.path.realpath(path))


def _walk(root: Path, out: Path, hidden: bool = True, mirrors: bool = True) -> Iterator[Path]:
    out = _real(out)

    def unreadable(error: OSError) -> None:  # a directory that cannot be listed is no empty one
        raise DocumentError(f"{error.filename}: cannot read this directory ({error.strerror or error})")

    for directory, subdirectories, names in os.walk(root, onerror=unreadable):
        subdirectories.sort()
        base = Path(directory)
        outputs = {d + defaults.OUTPUT_INFIX for d in subdirectories} if mirrors else set()
        subdirectories[:] = [  # `D.zh` beside `D`: D's output tree, with `mirrors`
            d
            for d in subdirectories
            if _real(base / d) != out and d not in outputs and (hidden or not d.startswith("."))
        ]
        for name in sorted(names):
            if not hidden and name.startswith("."):
                continue
            path = base / name
            stem, suffix, _ = split_name(path)
            if suffix.lower() in defaults.FORMAT_BY_SUFFIX and Path(stem).suffix != defaults.OUTPUT_INFIX:
                yield path


class OutputAppeared(DocumentError):
    """An output that did not exist when the run began exists when its translation is ready:
    something else made it meanwhile, and it is left as it is."""


@contextmanager
def atomic_target(path: Path, overwrite: bool = True, always: bool = False) -> Iterator[Path]:
    """A temporary path beside ``path`` to write; moved onto ``path`` if the block succeeds
    (with ``always``, however it ends: a log that keeps what was written before a failure).

    The temporary name (``.NAME.PID.tmp``, NAME shortened so that it fits the directory's
    longest name) never outlives the block. Without ``overwrite``, the move never replaces a
    file: where ``path`` exists by then (made by something else while the block wrote), it
    raises OutputAppeared and ``path`` is left as it is. A file in the place of one of the
    directories of ``path`` is NotADirectoryError naming it (mkdir's "File exists" would
    read as the output existing).
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):  # the file is the parent, or further up
        blocking = next((p for p in (path.parent, *path.parent.parents) if _not_a_directory(p)), None)
        if blocking is None:  # gone meanwhile: say what mkdir said
            raise
        reason = f"{os.strerror(errno.ENOTDIR)} ({blocking} exists and is not a directory)"
        raise NotADirectoryError(errno.ENOTDIR, reason, str(path)) from None
    temporary = path.with_name(_temporary_name(path))
    succeeded = False
    try:
        yield temporary
        succeeded = True
    finally:
        try:
            if succeeded or always:
                _move(temporary, path, overwrite)
        finally:
            temporary.unlink(missing_ok=True)


def _not_a_directory(path: Path) -> bool:
    """Whether something other than a directory (or a link to one) is at ``path``."""
    return os.path.lexists(path) and not path.is_dir()


def _temporary_name(path: Path) -> str:
    """``.NAME.PID.tmp``, NAME cut by whole characters so that the whole fits the directory's
    name limit (a target name near it would otherwise fail as its temporary name did not
    fit; a character cut in two would leave a name some writers, pyarrow's, cannot encode)."""
    tail = f".{os.getpid()}.tmp"
    try:
        limit = os.pathconf(path.parent, "PC_NAME_MAX")
    except (OSError, ValueError):
        limit = defaults.NAME_MAX
    name = path.name
    while name and len(os.fsencode(f".{name}{tail}")) > limit:
        name = name[:-1]
    return f".{name}{tail}"


def _move(temporary: Path, path: Path, overwrite: bool) -> None:
    """Rename ``temporary`` to ``path``; without ``overwrite``, OutputAppeared where ``path``
    exists, checked by a hard link (which no other writer can race) or, where the file
    system has none, by a look just before the rename."""
    if overwrite:
        os.replace(temporary, path)
        return
    try:
        os.link(temporary, path)
        return
    except FileExistsError:
        pass
    except OSError as error:
        if error.errno not in _NO_HARD_LINKS:
            raise
        if not os.path.lexists(path):
            os.replace(temporary, path)
            return
    raise OutputAppeared(
        f"{path}: made by something else while this run translated it; left as it is (--force overwrites)"
    )


def write_atomic(path: Path, text: str | Iterable[str], overwrite: bool = True) -> None:
    """Write ``text`` (or its pieces, one after another as they come) as UTF-8 (line endings
    unchanged) so that no reader sees a partial file.

    The text goes to a temporary file in the same directory (`atomic_target`), is flushed to
    disk, then moved onto ``path`` (without ``overwrite``, only if ``path`` still does not
    exist); an interrupted write leaves ``path`` as it was and no temp file. It is encoded a
    piece at a time, so a big text never exists twice in memory. A ``path`` ending in ``.gz``
    or ``.zst`` is written compressed that way (`producer.compression`).
    """
    piece = defaults.WRITE_CHUNK_CHARS
    with atomic_target(path, overwrite) as temporary, open(temporary, "wb") as handle:
        writer = compressing(handle, compression_of(path))
        for part in [text] if isinstance(text, str) else text:  # reading: its own errors
            with naming_output(path):
                for start in range(0, len(part), piece):
                    writer.write(part[start : start + piece].encode("utf-8"))
        with naming_output(path):
            writer.close()
            handle.flush()
            os.fsync(handle.fileno())


@contextmanager
def naming_output(path: Path) -> Iterator[None]:
    """An OSError that names no file, raised in the block (a write that finds the disk full),
    as one naming ``path``, the output written there: it is reported under the output's
    name, where one without a name would be taken for a failure of the input."""
    try:
        yield
    except OSError as error:
        if error.filename is not None:
            raise
        raise OSError(error.errno, error.strerror or str(error), str(path)) from error


def contained(root: Path, relative: str) -> Path:
    """``root / relative``, refused (DocumentError naming the path) unless it stays under ``root``.

    ``relative`` comes from stored job data, which anyone who can write to Redis can change:
    an absolute path, a ``..`` component or a symbolic link that leads out of ``root`` is
    refused before anything is written.
    """
    path = Path(relative)
    if not relative or path.is_absolute() or ".." in path.parts:
        raise DocumentError(f"{relative!r}: refusing to write outside {root} (not a plain relative path)")
    target = root / path
    if not target.resolve().is_relative_to(root.resolve()):
        raise DocumentError(f"{target}: refusing to write outside {root} (a symbolic link leads out of it)")
    return target
