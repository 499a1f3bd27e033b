"""The project's one writer (:mod:`syncguard.process.atomic`) and one reader of untrusted files
(:mod:`syncguard.process.untrusted`) under what breaks naive code: a FIFO, a device node, a
symbolic link at a predictable name, a full file system (a real tmpfs when the tests run as
root, else ``ENOSPC`` simulated), a file-size limit, and two runs claiming one result file."""

from __future__ import annotations

import errno
import os
import resource
import signal
import stat
import subprocess
from pathlib import Path
from typing import Iterator

import pytest

from syncguard.process import atomic as _atomic
from syncguard.process.untrusted import UntrustedError

posix = pytest.mark.skipif(os.name == "nt", reason="FIFOs, devices and flock need POSIX")


@pytest.fixture
def full_disk(tmp_path: Path) -> Iterator[Path]:
    """A folder on a 64 KiB tmpfs, mounted for the test (root only, else skipped)."""
    mnt = tmp_path / "full"
    mnt.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    got = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mnt)],
                         capture_output=True)
    if got.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {got.stderr.decode()[:80]}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def _enospc(*_a: object, **_k: object) -> int:
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


# ------------------------------------------------------------------------------ the writer
@posix
def test_a_full_tmpfs_is_one_output_error_and_the_old_file_is_kept(full_disk: Path) -> None:
    target = full_disk / "junit.xml"
    target.write_text("old\n")
    with pytest.raises(_atomic.OutputError) as got:
        _atomic.write_text(str(target), "x" * (1 << 20))
    assert "No space left on device" in str(got.value) and str(target) in str(got.value)
    assert target.read_text() == "old\n"
    assert os.listdir(full_disk) == ["junit.xml"], "the temporary file was left behind"


def test_enospc_while_writing_is_one_output_error(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "b.json"
    target.write_text("old\n")
    monkeypatch.setattr(os, "fsync", _enospc)
    with pytest.raises(_atomic.OutputError, match="No space left on device"):
        _atomic.write_text(str(target), "new\n")
    assert target.read_text() == "old\n"
    assert os.listdir(tmp_path) == ["b.json"]


@posix
def test_a_file_size_limit_is_one_output_error(tmp_path: Path) -> None:
    """EFBIG (RLIMIT_FSIZE; Python ignores SIGXFSZ) in a child process, so the limit never
    touches the test run."""
    code = (
        "import resource, sys\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))\n"
        "from syncguard.process import atomic as _atomic\n"
        "try:\n"
        f"    _atomic.write_text({str(tmp_path / 'big.txt')!r}, 'x' * 100000)\n"
        "except _atomic.OutputError as exc:\n"
        "    print(exc)\n"
        "    sys.exit(7)\n")
    got = subprocess.run([os.sys.executable, "-c", code], capture_output=True, text=True,
                         preexec_fn=lambda: signal.signal(signal.SIGXFSZ, signal.SIG_IGN))
    assert got.returncode == 7, got.stderr
    assert "file too large" in got.stdout
    assert not (tmp_path / "big.txt").exists()
    assert resource.getrlimit(resource.RLIMIT_FSIZE)[0] != 4096


def test_a_link_at_the_target_is_replaced_never_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("precious\n")
    link = tmp_path / "out" / "baseline.json"
    link.parent.mkdir()
    link.symlink_to(outside)
    _atomic.write_text(str(link), "new\n")
    assert outside.read_text() == "precious\n"
    assert not link.is_symlink() and link.read_text() == "new\n"


def test_temporary_names_are_not_predictable(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    seen = []
    real = _atomic._create_new

    def spy(path: str) -> int:
        seen.append(os.path.basename(path))
        return real(path)

    monkeypatch.setattr(_atomic, "_create_new", spy)
    for _ in range(2):
        _atomic.write_text(str(tmp_path / "f.json"), "x")
    assert len(set(seen)) == 2 and not any(str(os.getpid()) in s for s in seen)


def test_a_folder_at_the_target_is_refused(tmp_path: Path) -> None:
    (tmp_path / "f.json").mkdir()
    with pytest.raises(_atomic.OutputError, match="a folder"):
        _atomic.write_text(str(tmp_path / "f.json"), "x")
    assert os.listdir(tmp_path) == ["f.json"]


# ------------------------------------------------------------------------------ the claim
@posix
def test_a_claimed_result_file_refuses_a_second_run(tmp_path: Path) -> None:
    path = str(tmp_path / "result.jsonl")
    fd = _atomic.claim(path, force=False)
    try:
        os.write(fd, b"first run\n")
        for force in (True, False):
            with pytest.raises(_atomic.OutputError) as got:
                _atomic.claim(path, force=force)
            assert ("another syncguard run" in str(got.value)) if force else (
                "exists" in str(got.value))
        assert Path(path).read_text() == "first run\n", "the second run emptied it"
    finally:
        os.close(fd)
    fd = _atomic.claim(path, force=True)  # the first run ended: --force may replace it
    os.close(fd)
    assert Path(path).read_text() == ""


@posix
def test_a_claim_never_follows_a_link(tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("precious\n")
    link = tmp_path / "result.jsonl"
    link.symlink_to(outside)
    os.close(_atomic.claim(str(link), force=True))
    assert outside.read_text() == "precious\n" and not link.is_symlink()


# ------------------------------------------------------------------------------ the reader
@posix
def test_the_source_reader_refuses_a_fifo_without_blocking(tmp_path: Path) -> None:
    from syncguard.lint.files import read_source

    fifo = tmp_path / "hang.py"
    os.mkfifo(fifo)
    with pytest.raises(UntrustedError, match="FIFO"):
        read_source(str(fifo))


@posix
def test_the_source_reader_refuses_a_device_node(tmp_path: Path) -> None:
    from syncguard.lint.files import read_source

    dev = tmp_path / "zero.py"
    try:
        os.mknod(dev, 0o666 | stat.S_IFCHR, os.makedev(1, 5))  # /dev/zero
    except (PermissionError, OSError):
        pytest.skip("mknod needs root")
    with pytest.raises(UntrustedError, match="device"):
        read_source(str(dev))


def test_the_source_reader_caps_the_size(tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    from syncguard.lint import files

    monkeypatch.setattr(files, "MAX_SOURCE_BYTES", 1000)
    big = tmp_path / "big.py"
    big.write_text("x = 1\n" * 1000)
    with pytest.raises(UntrustedError, match="larger than"):
        files.read_source(str(big))


@posix
def test_a_file_system_without_locks_still_claims(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    import fcntl

    def no_locks(fd: int, op: int) -> None:
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(fcntl, "flock", no_locks)
    fd = _atomic.claim(str(tmp_path / "result.jsonl"), force=False)
    os.close(fd)
    with pytest.raises(_atomic.OutputError, match="exists"):
        _atomic.claim(str(tmp_path / "result.jsonl"), force=False)
