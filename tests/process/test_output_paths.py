"""Output paths: a regular file is replaced atomically; a character device or FIFO is written
in place as a stream and never swapped for a file; a folder, socket, block device or FIFO
without a reader is refused in one line (exit 2) before any work starts."""

from __future__ import annotations

import os
import socket
import stat
from pathlib import Path

import pytest
from _cli import SMALL, cli, one_error_line, write_result

from syncguard.cli import EXIT_OK, EXIT_USAGE
from syncguard.gate.baseline import Baseline, BaselineSite
from syncguard.process import atomic as _atomic

posix = pytest.mark.skipif(os.name == "nt", reason="devices and FIFOs need POSIX")


def _null_device(tmp_path: Path) -> Path:
    """A character device like /dev/null in tmp_path (needs root), else skip."""
    dev = tmp_path / "fn.xml"
    try:
        os.mknod(dev, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    except (PermissionError, AttributeError, OSError):
        pytest.skip("mknod needs root")
    return dev


def _is_char(p: Path) -> bool:
    return stat.S_ISCHR(os.lstat(p).st_mode)


@posix
@pytest.mark.parametrize("argv", [
    ("check", "{res}", "--format", "junit", "-o", "{dev}"),
    ("check", "{res}", "--format", "sarif", "-o", "{dev}"),
    ("check", "{res}", "--format", "github", "-o", "{dev}"),
    ("check", "{res}", "--update-baseline", "{dev}"),
    ("show", "{res}", "-o", "{dev}.md"),
    ("compare", "{res}", "{res}", "-o", "{dev}.csv"),
])
def test_a_character_device_is_written_as_a_stream_not_replaced(
        argv: tuple, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    dev = _null_device(tmp_path)
    res = write_result(tmp_path / "r.jsonl")
    args = [a.format(res=res, dev=dev) for a in argv]
    if args[-1] != str(dev):  # show/compare pick the format by extension
        os.rename(dev, args[-1])
        dev = Path(args[-1])
    rc, _, err = cli(capsys, *args)
    assert rc in (EXIT_OK, 1), err
    assert _is_char(dev), "the device was replaced by a regular file"
    assert not [p for p in os.listdir(tmp_path) if p.endswith(".tmp")]


@posix
def test_a_fifo_with_a_reader_gets_the_report(tmp_path: Path,
                                               capsys: pytest.CaptureFixture) -> None:
    res = write_result(tmp_path / "r.jsonl")
    fifo = tmp_path / "junit.xml"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        rc, _, err = cli(capsys, "check", str(res), "--format", "junit", "-o", str(fifo))
        got = os.read(reader, 1 << 20)
    finally:
        os.close(reader)
    assert rc in (EXIT_OK, 1), err
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert got.startswith(b"<?xml")


@posix
def test_a_fifo_without_a_reader_is_refused_at_once(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture) -> None:
    res = write_result(tmp_path / "r.jsonl")
    fifo = tmp_path / "junit.xml"
    os.mkfifo(fifo)
    rc, _, err = cli(capsys, "check", str(res), "--format", "junit", "-o", str(fifo))
    assert rc == EXIT_USAGE and "FIFO with no reader" in one_error_line(err)


@posix
@pytest.mark.parametrize("cmd", ["check", "show", "exec"])
def test_folders_and_sockets_are_refused_before_any_work(
        cmd: str, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    res = write_result(tmp_path / "r.jsonl")
    folder = tmp_path / "x.md"
    folder.mkdir()
    sock_path = tmp_path / "s.md"
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(sock_path))
    try:
        for target, what in ((folder, "a folder"), (sock_path, "a socket")):
            if cmd == "check":
                argv = ["check", str(res), "--format", "junit", "-o", str(target)]
            elif cmd == "show":
                argv = ["show", str(res), "-o", str(target), "--force"]
            else:
                ran = tmp_path / "ran"
                prog = tmp_path / "p.py"
                prog.write_text(f"open({str(ran)!r}, 'w').close()\n", encoding="utf-8")
                argv = ["exec", "--device", "cpu", "--max-syncs", "0", "--format", "junit",
                        "-o", str(target), "--out", str(tmp_path / "o"), "--", "python",
                        str(prog)]
            rc, _, err = cli(capsys, *argv)
            assert rc == EXIT_USAGE and what in one_error_line(err), err
            if cmd == "exec":
                assert not (tmp_path / "ran").exists(), "the program ran before the refusal"
    finally:
        sock.close()


@posix
def test_a_folder_named_like_a_report_is_refused_before_the_run(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "out"
    (out / "report.md").mkdir(parents=True)
    for force in ((), ("--force",)):
        rc, _, err = cli(capsys, "run", SMALL, "--device", "sim", "--out", str(out),
                         "--steps", "2", "--warmup", "0", "--no-timed", *force)
        assert rc == EXIT_USAGE and "a folder" in one_error_line(err)
        assert not (out / "result.jsonl").exists()


@posix
def test_an_out_folder_that_cannot_hold_files_is_refused_up_front(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    rc, _, err = cli(capsys, "run", SMALL, "--device", "sim", "--out", "/proc/syncguard-x",
                     "--steps", "2", "--warmup", "0", "--no-timed")
    assert rc == EXIT_USAGE and "/proc/syncguard-x" in one_error_line(err)


@posix
def test_baseline_save_writes_a_device_in_place(tmp_path: Path) -> None:
    dev = _null_device(tmp_path)
    Baseline([BaselineSite("s", "p", "k", 1)]).save(str(dev))
    assert _is_char(dev)


def test_regular_files_are_still_replaced_atomically(tmp_path: Path) -> None:
    target = tmp_path / "a.txt"
    target.write_text("old\n", encoding="utf-8")
    ino = os.stat(target).st_ino
    _atomic.write_text(str(target), "new\n")
    assert target.read_text(encoding="utf-8") == "new\n"
    assert os.stat(target).st_ino != ino  # a new file renamed over the old one
