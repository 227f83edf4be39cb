"""producer.inputs: only regular files are read, within the line limit, on real files."""

from __future__ import annotations

import gzip
import io
import os
import socket
import threading
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from producer import defaults, inputs
from producer.inputs import Limits, decode_input, failure, stdin_lines, stream_input
from producer.layout import DocumentError
from producer.pipeline import stream_units


def read_input(path: Path, line_bytes: int = defaults.MAX_LINE_BYTES) -> bytes:
    """All the pieces of ``stream_input``."""
    return b"".join(stream_input(path, Limits(line_bytes=line_bytes)))


def read_in_thread(path: Path) -> BaseException | bytes:
    """read_input(path) in a daemon thread: a read that blocks fails the test instead of hanging it."""
    outcome: list[BaseException | bytes] = []

    def read() -> None:
        try:
            outcome.append(read_input(path))
        except BaseException as error:  # noqa: BLE001 - handed to the test
            outcome.append(error)

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    thread.join(timeout=30)
    assert outcome, f"reading {path} blocked"
    return outcome[0]


def test_a_regular_file_is_read_byte_for_byte(tmp_path):
    path = tmp_path / "a.txt"
    path.write_bytes(b"One.\r\nTwo \xe4\xb8\xad.\n\nno end")
    assert read_input(path) == b"One.\r\nTwo \xe4\xb8\xad.\n\nno end"
    link = tmp_path / "link.txt"
    link.symlink_to(path)
    assert read_input(link) == path.read_bytes()


def test_a_fifo_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "pipe.txt"
    os.mkfifo(fifo)
    error = read_in_thread(fifo)
    assert isinstance(error, DocumentError)
    assert str(error) == f"{fifo}: not a regular file (a FIFO); not read"
    link = tmp_path / "link.txt"
    link.symlink_to(fifo)
    assert "(a FIFO)" in str(read_in_thread(link))


@pytest.mark.parametrize(
    ("device", "kind"), [("/dev/zero", "a character device"), ("/dev/null", "a character device")]
)
def test_a_device_linked_as_a_document_is_refused(tmp_path, device, kind):
    link = tmp_path / "zero.txt"
    link.symlink_to(device)
    error = read_in_thread(link)
    assert isinstance(error, DocumentError) and str(error) == f"{link}: not a regular file ({kind}); not read"


def test_a_socket_and_a_directory_are_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # a short path: socket addresses are limited to about 100 bytes
    server = socket.socket(socket.AF_UNIX)
    server.bind("sock.md")
    try:
        with pytest.raises(DocumentError, match=r"^sock\.md: not a regular file \(a socket\); not read$"):
            read_input(Path("sock.md"))
    finally:
        server.close()
    (tmp_path / "dir.txt").mkdir()
    with pytest.raises(DocumentError, match=r"dir\.txt: not a regular file \(a directory\)"):
        read_input(tmp_path / "dir.txt")


def test_link_loops_and_dangling_links_say_what_they_are(tmp_path):
    (tmp_path / "a.txt").symlink_to(tmp_path / "b.txt")
    (tmp_path / "b.txt").symlink_to(tmp_path / "a.txt")
    with pytest.raises(OSError, match="symbolic link loop") as loop:
        read_input(tmp_path / "a.txt")
    assert failure(tmp_path / "a.txt", loop.value) == f"{tmp_path / 'a.txt'}: symbolic link loop"
    (tmp_path / "gone.txt").symlink_to("nowhere.txt")
    with pytest.raises(FileNotFoundError) as dangling:
        read_input(tmp_path / "gone.txt")
    assert failure(tmp_path / "gone.txt", dangling.value) == (
        f"{tmp_path / 'gone.txt'}: dangling symbolic link to nowhere.txt"
    )
    with pytest.raises(FileNotFoundError, match="No such file or directory"):
        read_input(tmp_path / "missing.txt")


def test_a_line_over_the_limit_names_file_and_line(tmp_path):
    path = tmp_path / "doc.md"
    path.write_bytes(b"short\r\n" + b"x" * 9 + b"\n" + b"y" * 10 + b"\ntail")
    assert read_input(path, 10) == path.read_bytes()  # "short\r" counts 6
    with pytest.raises(DocumentError) as error:
        read_input(path, 9)
    assert str(error.value) == f"{path}:3: line longer than 9 bytes (TRANSQUEUE_MAX_LINE_BYTES)"


def test_a_50_mb_single_line_is_refused_at_its_start(tmp_path, monkeypatch):
    path = tmp_path / "one-line.txt"
    with path.open("wb") as handle:
        handle.truncate(50_000_000)  # sparse: 50 MB of NUL bytes, no line break
    offsets: list[int] = []  # a duplicate of each descriptor opened: it shares the read offset
    real_open = inputs.open_regular

    def open_regular(opened: Path):
        handle = real_open(opened)
        offsets.append(os.dup(handle.fileno()))
        return handle

    monkeypatch.setattr(inputs, "open_regular", open_regular)
    with pytest.raises(DocumentError, match=r"one-line\.txt:1: line longer than 1,048,576 bytes"):
        read_input(path, 1 << 20)
    (descriptor,) = offsets
    read = os.lseek(descriptor, 0, os.SEEK_CUR)
    os.close(descriptor)
    # Reading stops at the piece that passes the limit: about one line (1 MiB) in.
    assert (1 << 20) < read <= (1 << 20) + defaults.READ_CHUNK_BYTES


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.sampled_from([b"a", b"bc", b"\n", b"\r\n", b"defgh"]), max_size=60).map(b"".join),
    st.integers(min_value=1, max_value=12),
    st.integers(min_value=1, max_value=16),
)
def test_line_limit_whatever_the_pieces(tmp_path_factory, data, limit, piece):
    """Each line is measured exactly however the reads cut the file."""
    path = tmp_path_factory.getbasetemp() / "pieces.txt"
    path.write_bytes(data)
    lines = data.split(b"\n")
    too_long = next((n for n, line in enumerate(lines, 1) if len(line) > limit), None)
    with mock.patch.object(defaults, "READ_CHUNK_BYTES", piece):
        if too_long is None:
            assert read_input(path, limit) == data
        else:
            with pytest.raises(
                DocumentError, match=rf"pieces\.txt:{too_long}: line longer than {limit} bytes"
            ):
                read_input(path, limit)


def test_decode_names_the_line_of_invalid_utf8_anywhere_in_a_big_file():
    data = b"fine line\n" * 5000 + b"bad \xff here\n"
    with pytest.raises(DocumentError, match=r"^big\.txt:5001: not valid UTF-8 \(invalid start byte\)$"):
        decode_input(data, "big.txt")
    assert decode_input(b"caf\xc3\xa9\r\n", "x") == "café\r\n"


@pytest.mark.parametrize(
    ("encoding", "name"),
    [("utf-16", "UTF-16"), ("utf-16-be", "UTF-16"), ("utf-32", "UTF-32"), ("utf-32-be", "UTF-32")],
)
def test_a_utf16_or_utf32_file_is_named_as_such(tmp_path, encoding, name):
    """Its byte order mark tells it: "not valid UTF-8 (invalid start byte)" alone left the
    reader to guess why a file that opens fine in an editor was refused."""
    data = ("\ufeffHello there.\nBye.\n").encode(encoding)
    message = (
        rf"^u\.txt:1: not valid UTF-8 \(.+\); it starts with a {name} byte order mark: "
        rf"convert it \(iconv -f {name} -t UTF-8\)$"
    )
    with pytest.raises(DocumentError, match=message):
        decode_input(data, "u.txt")
    with pytest.raises(DocumentError, match=message.replace("u\\.txt", "<stdin>")):
        list(stream_units(iter([data])))
    with pytest.raises(DocumentError, match=r"^u\.txt:3: not valid UTF-8 \(invalid start byte\)$"):
        decode_input(data, "u.txt", first_line=3)  # a later window: no mark to look for


@pytest.mark.parametrize("encoding", ["utf-16-le", "utf-16-be"])
def test_utf16_without_a_byte_order_mark_is_refused_not_translated(encoding):
    """ASCII text in UTF-16 without a mark is valid UTF-8, a NUL beside every character: it
    was translated as such, garbage in and out, without a word; from stdin too."""
    data = "Hello there.\nBye.\n".encode(encoding)
    with pytest.raises(DocumentError, match=r"^u\.txt:1: mostly NUL bytes, .*iconv -f UTF-16LE"):
        decode_input(data, "u.txt")
    with pytest.raises(DocumentError, match=r"^<stdin>:1: mostly NUL bytes"):
        list(stream_units(iter(data.splitlines(keepends=True))))
    assert decode_input(b"a\0b and more text\n", "x") == "a\0b and more text\n"  # a stray NUL is text
    padded = b"\0" * 64  # a later window: a file that ends in NUL padding is read as it is
    assert decode_input(padded, "x", first_line=40) == padded.decode()


def test_stdin_lines_never_read_more_than_one_byte_over_the_limit():
    stream = io.BytesIO(b"ok line\n" + b"z" * 1_000_000 + b"\nafter\n")
    lines = stdin_lines(stream, 16)
    assert next(lines) == b"ok line\n"
    assert next(lines) == b"z" * 17 and stream.tell() == 8 + 17


def test_a_file_over_the_file_limit_fails_as_its_bytes_pass_it(tmp_path):
    plain, packed = tmp_path / "big.txt", tmp_path / "big.txt.gz"
    plain.write_bytes(b"a line\n" * 1000)
    packed.write_bytes(gzip.compress(b"a line\n" * 1000))
    limits = Limits(file_bytes=6999)
    with pytest.raises(
        DocumentError, match=r"big\.txt: larger than 6,999 bytes \(TRANSQUEUE_MAX_FILE_BYTES\)"
    ):
        b"".join(stream_input(plain, limits))
    with pytest.raises(DocumentError, match="larger than 6,999 bytes once decompressed"):
        b"".join(stream_input(packed, limits))
    assert len(b"".join(stream_input(plain, Limits(file_bytes=7000)))) == 7000
